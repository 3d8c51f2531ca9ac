package blast

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/relayload/relayload/internal/pool"
)

// A result says which schedule it belongs to and which part of it it
// holds, so that Merge can refuse what would count slots twice (a file
// merged with itself would report twice the rate it was sent at).

// newRunID names one run: random, so that two runs never share one and a
// copy of a result file still names its run.
func newRunID() string {
	return rand.Text()[:16] // 80 random bits
}

// poolDigest identifies what a pool sends apart from its timestamps, which
// every run anchors anew (so its bodies differ from run to run): the
// options it was built with (for a replayed pool, its corpus), its
// projects and its list of agents if it has one. Processes that build the
// same pool (the shards of one schedule) get the same digest.
func poolDigest(p *pool.Pool) string {
	o := p.Options
	h := sha256.New()
	fmt.Fprintf(h, "seed=%d entries=%d mix=%s zipf_s=%g user_agents=%d unique=%t encoding=%s\n",
		o.Seed, len(p.Entries), o.Mix, o.ZipfS, o.UserAgents, o.UniqueUserAgents, o.Encoding)
	if o.Corpus != "" {
		fmt.Fprintf(h, "corpus=%s\n", o.Corpus)
	}
	for _, pr := range o.Projects {
		fmt.Fprintf(h, "%d %d %s %s %d\n", pr.ID, pr.OrgID, pr.Slug, pr.PublicKey, pr.KeyID)
	}
	// A list of agents counts by its content, not its file's name: shards
	// may read copies of one list from different paths.
	for _, a := range o.Agents {
		fmt.Fprintf(h, "agent %q %g\n", a.UA, a.Weight)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// name is how Merge's errors call rs[i]: its file, or its position.
func name(rs []*Result, i int) string {
	if rs[i].Source != "" {
		return rs[i].Source
	}
	return fmt.Sprintf("result %d", i)
}

// older reports whether r was written by a blast that did not record its
// runs and shards (an older blast).
func (r *Result) older() bool { return len(r.RunIDs) == 0 }

// errUnknownShards: a merge written by an older blast does not say which
// shards it holds.
var errUnknownShards = errors.New("shards unknown")

// shardsCovered is the shards r holds: its own for a run, the recorded
// union for a merge.
func (r *Result) shardsCovered() ([]int, error) {
	switch {
	case r.Shard >= 0 && r.Shard < max(r.Shards, 1):
		return []int{r.Shard}, nil
	case r.Shard >= 0:
		return nil, fmt.Errorf("shard %d/%d out of range", r.Shard, r.Shards)
	case len(r.ShardsCovered) > 0:
		return r.ShardsCovered, nil
	}
	return nil, errUnknownShards
}

// scheduleDiff names the first field that defines the shared schedule in
// which a and b differ, with both values ("" when they agree).
func scheduleDiff(a, b *Result) string {
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"rate", a.Rate, b.Rate},
		{"shards", a.Shards, b.Shards},
		{"seed", a.Seed, b.Seed},
		{"duration", a.Duration, b.Duration},
		{"count", a.Count, b.Count},
		{"warm-up", a.Warmup, b.Warmup},
		{"pool entries", a.PoolEntries, b.PoolEntries},
		{"encoding", a.Encoding, b.Encoding},
		{"pool (mix, projects, user agents or zipf-s)", a.PoolDigest, b.PoolDigest},
	} {
		if f.a != f.b {
			return fmt.Sprintf("%s %v vs %v", f.name, f.a, f.b)
		}
	}
	return ""
}

// checkMergeable refuses results that cannot be added up honestly: of
// another schema, damaged (see checkInvariants), counting together more
// than MaxCount requests, of different schedules, from blasts of both before and
// after run identities were recorded, holding one run twice (a file given
// twice, or a copy of it), or covering one shard twice (two runs of it, or
// a merge and one of its parts). It returns the shards the merge covers
// (nil if unknown: a lone merge by an older blast).
func checkMergeable(rs []*Result) ([]int, error) {
	for i, r := range rs {
		if r.Schema != SchemaVersion {
			return nil, fmt.Errorf("%s has schema %d, want %d", name(rs, i), r.Schema, SchemaVersion)
		}
		if err := r.checkInvariants(); err != nil {
			return nil, fmt.Errorf("%s is damaged: %w", name(rs, i), err)
		}
	}
	if err := checkTotals(rs); err != nil {
		return nil, err
	}
	if len(rs) == 1 { // alone, nothing can overlap
		covered, err := rs[0].shardsCovered()
		if err != nil && !errors.Is(err, errUnknownShards) {
			return nil, fmt.Errorf("%s: %w", name(rs, 0), err)
		}
		return covered, nil
	}
	runs := map[string]int{} // run id → the result holding it
	shards := map[int]int{}  // shard → the result covering it
	for i, r := range rs {
		if i > 0 && r.older() != rs[0].older() {
			older, newer := i, 0
			if rs[0].older() {
				older, newer = 0, i
			}
			return nil, fmt.Errorf("%s was written by an older blast that does not record its schedule, %s by a newer one: merge files of one version",
				name(rs, older), name(rs, newer))
		}
		if d := scheduleDiff(rs[0], r); d != "" {
			return nil, fmt.Errorf("%s and %s are not one schedule: %s", name(rs, 0), name(rs, i), d)
		}
		for _, id := range r.RunIDs {
			if j, ok := runs[id]; ok {
				return nil, fmt.Errorf("%s and %s hold the same run %s: its slots would count twice", name(rs, j), name(rs, i), id)
			}
			runs[id] = i
		}
		covered, err := r.shardsCovered()
		if errors.Is(err, errUnknownShards) {
			return nil, fmt.Errorf("%s is a merge by an older blast that does not record its shards: it cannot be merged with more results", name(rs, i))
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", name(rs, i), err)
		}
		for _, s := range covered {
			if j, ok := shards[s]; ok {
				return nil, fmt.Errorf("%s and %s both cover shard %d/%d: its slots would count twice", name(rs, j), name(rs, i), s, r.Shards)
			}
			shards[s] = i
		}
	}
	return slices.Sorted(maps.Keys(shards)), nil
}

// MergeFiles reads result files (see ReadFile) and merges them (see
// Merge), first refusing a file given twice: the same path, or another
// name (a link) of the same file.
func MergeFiles(paths ...string) (*Result, error) {
	seen := make([]os.FileInfo, 0, len(paths))
	rs := make([]*Result, 0, len(paths))
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("blast: %w", err)
		}
		for j, prev := range seen {
			if os.SameFile(prev, st) {
				if paths[j] == path {
					return nil, fmt.Errorf("blast: merge: %s given twice", path)
				}
				return nil, fmt.Errorf("blast: merge: %s and %s are one file given twice", paths[j], path)
			}
		}
		seen = append(seen, st)
		r, err := ReadFile(path)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return Merge(rs...)
}
