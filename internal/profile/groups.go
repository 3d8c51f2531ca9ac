package profile

import (
	"strings"
)

// Group is a named kind of work, recognized by its frames.
type Group struct {
	// Name is short and stable, e.g. "user-agent".
	Name string
	// Desc says in a few words what the group matches, for a report.
	Desc string
	// Match reports whether a frame belongs to the group. A sample is in
	// the group when any frame of its stack matches.
	Match func(Frame) bool
}

// GroupShare is a group's share of a profile.
type GroupShare struct {
	// Name is the group's name.
	Name string
	// Inclusive is the percentage of all samples (by weight) with at least
	// one frame of the group on the stack: the time spent in that work,
	// callees included.
	Inclusive float64
	// Self is the percentage of all samples whose leaf frame matches.
	Self float64
	// InclusiveWeight and SelfWeight are the same as weights.
	InclusiveWeight, SelfWeight int64
	// Samples is the number of samples in the group (inclusive).
	Samples int64
}

// Groups returns each group's share of the profile, in the order given.
// Groups may overlap (user-agent parsing is part of event normalization
// and mostly regex matching), so the shares need not add up to 100.
func (p *Profile) Groups(gs []Group) []GroupShare {
	out := make([]GroupShare, len(gs))
	for gi, g := range gs {
		out[gi].Name = g.Name
		if g.Match == nil {
			continue
		}
		m := make([]bool, len(p.frames))
		for id, f := range p.frames {
			m[id] = g.Match(f)
		}
		var incl, self, n int64
		for si := range p.stacks {
			s := &p.stacks[si]
			fs := p.arena[s.off : s.off+s.n]
			for _, f := range fs {
				if m[f] {
					incl = satAdd(incl, s.weight)
					n += s.samples
					break
				}
			}
			if len(fs) > 0 && m[fs[len(fs)-1]] {
				self = satAdd(self, s.weight)
			}
		}
		out[gi] = GroupShare{Name: g.Name, Inclusive: pct(incl, p.Weight), Self: pct(self, p.Weight),
			InclusiveWeight: incl, SelfWeight: self, Samples: n}
	}
	return out
}

// Names of the default groups.
const (
	GroupUserAgent     = "user-agent"
	GroupPII           = "pii-scrubbing"
	GroupNormalization = "normalization"
	GroupJSON          = "json"
	GroupCompression   = "compression"
	GroupSigning       = "signing"
	GroupRegex         = "regex"
	GroupAllocation    = "allocation"
	GroupKernel        = "kernel"
)

// DefaultGroups returns the kinds of work Relay's CPU time is usually
// asked about, with patterns taken from the function and crate names of
// Relay 26.4.0 and its dependencies as perf prints them (demangled Rust
// names, C names of the statically linked zstd and mimalloc).
//
// A Rust pattern such as "serde_json::" matches where a path of the name
// starts with it: the function's own path, or the type or trait of an
// impl ("<&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_any",
// "relay_protocol::impls::<impl … for …>::from_value"), but not a generic
// argument ("core::ptr::drop_in_place<uaparser::file::RegexFile>" is not
// user-agent parsing, "…::reserve::<alloc::alloc::Global>" is not an
// allocator call).
//
//   - user-agent: parsing User-Agent headers and client hints into browser,
//     OS and device contexts. uaparser:: (the uap-core regex database that
//     relay_ua wraps; its SubParser::try_parse is the hot loop), relay_ua::,
//     relay_event_normalization::normalize::user_agent:: (with the known
//     hot function normalize_user_agent_info_generic and the
//     FromUserAgentInfo impls) and relay_event_normalization::eap::normalize_user_agent
//     (logs and spans).
//   - pii-scrubbing: Relay's data scrubbing. relay_pii:: (PiiProcessor,
//     the rules, selectors and regex application) and the scrub steps of
//     relay_server's processing pipelines (relay_server::processing::…::scrub,
//     scrub_*; services::processor::…::scrub), which drive relay_pii
//     through relay_event_schema's generic traversal.
//   - normalization: event normalization. relay_event_normalization:: (so
//     it contains user-agent) and the normalize steps of relay_server's
//     pipelines (relay_server::processing::…::normalize, normalize_*).
//   - json: serde_json:: (parsing and writing every event and envelope
//     item) and relay_protocol's Annotated::to_json/from_json* entry points.
//   - compression: zstd (zstd::, zstd_safe::, zstd_sys::, ruzstd:: and the
//     C functions of libzstd linked into Relay: ZSTD_*, ZSTDMT_*, HUF_*,
//     FSE_*, HIST_*, ZDICT_*), gzip/deflate (flate2::, miniz_oxide::,
//     crc32fast::, libz_sys::, libz_rs_sys::, zlib_rs::, and libz.so),
//     brotli (brotli::, brotli_decompressor::, libbrotli*.so), the
//     async_compression:: and compression_codecs:: layers of the HTTP
//     server, bzip2, lz4_flex:: and snap::.
//   - signing: Relay's request signatures. relay_auth:: (SecretKey::sign,
//     PublicKey::verify, the registration handshake), ed25519_dalek::,
//     ed25519::, curve25519_dalek::. sha2 is left out: Relay hashes with it
//     elsewhere too; under a signature it is counted through the frames
//     above it.
//   - regex: regex::, regex_automata:: (where user-agent parsing and PII
//     rules spend their time), regex_syntax:: (compiling), fancy_regex::,
//     regex_lite:: and aho_corasick:: (regex's literal prefilter).
//   - allocation: the allocator. Relay 26.4.0 uses mimalloc as the global
//     allocator ("override" feature), whose C functions are mi_* and
//     _mi_*, and mimalloc::/libmimalloc_sys::; older builds used jemalloc
//     (_rjem_*, je_*, tikv_jemallocator::); libc's malloc, free, realloc,
//     calloc, posix_memalign, aligned_alloc, memalign, malloc_usable_size,
//     __libc_*, _int_*; Rust's __rust_alloc, __rust_dealloc,
//     __rust_realloc, __rust_alloc_zeroed; alloc::alloc:: (exchange_malloc,
//     Global) and alloc::raw_vec:: (Vec and String growth). Not all of
//     alloc:: (collections, strings, formatting), which is not allocator
//     work.
//   - kernel: any kernel frame ([kernel.kallsyms], kernel addresses):
//     system calls, page faults, interrupts, scheduling.
//
// Groups overlap, and their order is the precedence of colors in
// WriteFlameSVG (the first group a frame matches gives its hue).
func DefaultGroups() []Group {
	return []Group{
		{
			Name: GroupUserAgent,
			Desc: "User-Agent and client-hints parsing (uaparser, relay_ua, normalize::user_agent)",
			Match: matcher{paths: []string{
				"uaparser::",
				"relay_ua::",
				"relay_event_normalization::normalize::user_agent::",
				"relay_event_normalization::eap::normalize_user_agent",
			}}.match,
		},
		{
			Name: GroupPII,
			Desc: "PII scrubbing (relay_pii, the scrub steps of relay_server)",
			Match: matcher{
				paths: []string{"relay_pii::"},
				steps: []string{"scrub"},
			}.match,
		},
		{
			Name: GroupNormalization,
			Desc: "event normalization (relay_event_normalization, the normalize steps of relay_server)",
			Match: matcher{
				paths: []string{"relay_event_normalization::"},
				steps: []string{"normalize"},
			}.match,
		},
		{
			Name: GroupJSON,
			Desc: "JSON (serde_json, Annotated::to_json/from_json)",
			Match: matcher{paths: []string{
				"serde_json::",
				"relay_protocol::annotated::Annotated::to_json",
				"relay_protocol::annotated::Annotated::to_json_pretty",
				"relay_protocol::annotated::Annotated::from_json",
				"relay_protocol::annotated::Annotated::from_json_bytes",
			}}.match,
		},
		{
			Name: GroupCompression,
			Desc: "compression (zstd, gzip/deflate, brotli)",
			Match: matcher{
				paths: []string{
					"zstd::", "zstd_safe::", "zstd_sys::", "ruzstd::",
					"flate2::", "miniz_oxide::", "crc32fast::", "libz_sys::", "libz_rs_sys::", "zlib_rs::",
					"brotli::", "brotli_decompressor::",
					"async_compression::", "compression_codecs::",
					"bzip2::", "libbz2_rs_sys::", "lz4_flex::", "snap::",
				},
				prefixes: []string{"ZSTD_", "ZSTDMT_", "HUF_", "FSE_", "HIST_", "ZDICT_"},
				dsos:     []string{"libz.so", "libzstd.so", "libbrotli"},
			}.match,
		},
		{
			Name: GroupSigning,
			Desc: "request signatures (relay_auth, ed25519)",
			Match: matcher{paths: []string{
				"relay_auth::", "ed25519_dalek::", "ed25519::", "curve25519_dalek::",
			}}.match,
		},
		{
			Name: GroupRegex,
			Desc: "regular expressions (regex, regex_automata, aho_corasick)",
			Match: matcher{paths: []string{
				"regex::", "regex_automata::", "regex_syntax::", "fancy_regex::", "regex_lite::", "aho_corasick::",
			}}.match,
		},
		{
			Name: GroupAllocation,
			Desc: "the allocator (mimalloc, jemalloc, malloc/free, __rust_alloc, Vec growth)",
			Match: matcher{
				paths: []string{
					"mimalloc::", "libmimalloc_sys::", "tikv_jemallocator::", "tikv_jemalloc_sys::",
					"alloc::alloc::", "alloc::raw_vec::",
					"__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rust_alloc_zeroed",
					"__rustc::__rust_alloc", "__rustc::__rust_dealloc", "__rustc::__rust_realloc", "__rustc::__rust_alloc_zeroed",
				},
				prefixes: []string{"mi_", "_mi_", "_rjem_", "je_", "__libc_malloc", "__libc_free", "__libc_realloc",
					"__libc_calloc", "__libc_memalign", "_int_malloc", "_int_free", "_int_realloc", "_int_memalign",
					"malloc_consolidate", "tcache_"},
				exact: []string{"malloc", "free", "realloc", "calloc", "cfree", "posix_memalign", "aligned_alloc",
					"memalign", "valloc", "pvalloc", "malloc_usable_size", "reallocarray"},
			}.match,
		},
		{
			Name:  GroupKernel,
			Desc:  "the kernel (system calls, page faults, interrupts)",
			Match: func(f Frame) bool { return f.Kernel },
		},
	}
}

// matcher matches frames by name.
// PrefixGroup is a group of the frames whose name starts with one of
// prefixes (Go function names: "net/http.", "runtime.findRunnable").
func PrefixGroup(name, desc string, prefixes ...string) Group {
	return Group{Name: name, Desc: desc, Match: matcher{prefixes: prefixes}.match}
}

type matcher struct {
	// paths are Rust paths, matched where a path of the name's owner text
	// starts (see ownerText). One that does not end in "::" must also end
	// where the path does, or continue with "::".
	paths []string
	// prefixes match the start of a C name.
	prefixes []string
	// exact match whole names.
	exact []string
	// steps match a function of relay_server's processing pipelines whose
	// own name, or a parent's, is the step or starts with step + "_".
	steps []string
	// dsos match the start of the frame's binary's base name.
	dsos []string
}

func (m matcher) match(f Frame) bool {
	name := f.Name
	for _, e := range m.exact {
		if name == e {
			return true
		}
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, d := range m.dsos {
		if strings.HasPrefix(f.DSO, d) {
			return true
		}
	}
	if len(m.paths) == 0 && len(m.steps) == 0 {
		return false
	}
	own := ownerText(name)
	for _, p := range m.paths {
		if hasPath(own, p) {
			return true
		}
	}
	for _, st := range m.steps {
		if hasStep(own, st) {
			return true
		}
	}
	return false
}

// ownerText returns the parts of a demangled Rust name that say whose code
// it is: its path and, in a qualified path "<Type as Trait>::f" or an impl
// block "<impl Trait for Type>", the Type and the Trait, with every generic
// argument list ("Vec<T>", "::<Global>") left out.
//
// "<&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_any"
// gives "<&mut serde_json::de::Deserializer as serde_core::de::Deserializer>::deserialize_any";
// "core::ptr::drop_in_place<uaparser::file::RegexFile>" gives
// "core::ptr::drop_in_place".
func ownerText(name string) string {
	if !strings.ContainsRune(name, '<') {
		return name
	}
	b := make([]byte, 0, len(name))
	var open []bool // per open '<': whether it is a qualified path (kept)
	hidden := 0     // open generic argument lists
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '<':
			q := false
			if hidden == 0 {
				if i == 0 || strings.HasPrefix(name[i+1:], "impl ") {
					q = true
				} else {
					switch name[i-1] {
					case '<', ' ', '&', '*', '(', '[', ',':
						q = true
					}
				}
			}
			open = append(open, q)
			if q {
				b = append(b, c)
			} else {
				if hidden == 0 && len(b) >= 2 && string(b[len(b)-2:]) == "::" {
					b = b[:len(b)-2] // a turbofish: f::<T>
				}
				hidden++
			}
		case '>':
			if len(open) == 0 {
				if hidden == 0 {
					b = append(b, c)
				}
				continue
			}
			q := open[len(open)-1]
			open = open[:len(open)-1]
			if !q {
				hidden--
			} else if hidden == 0 {
				b = append(b, c)
			}
		default:
			if hidden == 0 {
				b = append(b, c)
			}
		}
	}
	return string(b)
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// hasPath reports whether a path of own starts with p: p occurs at the
// start of own or after a character that cannot be part of a path, and,
// when p does not end in "::", is not followed by more of the same name.
func hasPath(own, p string) bool {
	for i := 0; ; {
		j := strings.Index(own[i:], p)
		if j < 0 {
			return false
		}
		j += i
		i = j + 1
		if j > 0 && (isIdent(own[j-1]) || own[j-1] == ':') {
			continue
		}
		end := j + len(p)
		if !strings.HasSuffix(p, "::") && end < len(own) && isIdent(own[end]) {
			continue
		}
		return true
	}
}

// stepRoots are the parts of relay_server that run the processing
// pipelines, whose normalize and scrub steps the groups count.
var stepRoots = []string{"relay_server::processing::", "relay_server::services::processor::"}

// hasStep reports whether own has a path under one of stepRoots with a
// segment that is step or starts with step + "_".
func hasStep(own, step string) bool {
	for _, root := range stepRoots {
		for i := 0; ; {
			j := strings.Index(own[i:], root)
			if j < 0 {
				break
			}
			j += i
			i = j + 1
			if j > 0 && (isIdent(own[j-1]) || own[j-1] == ':') {
				continue
			}
			rest := own[j+len(root):]
			end := 0
			for end < len(rest) && (isIdent(rest[end]) || rest[end] == ':') {
				end++
			}
			for _, seg := range strings.Split(rest[:end], "::") {
				if seg == step || strings.HasPrefix(seg, step+"_") {
					return true
				}
			}
		}
	}
	return false
}
