package profile

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.folded golden files")

func parseFile(t testing.TB, name string) *Profile {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return p
}

func folded(t testing.TB, p *Profile) string {
	t.Helper()
	var b bytes.Buffer
	if err := p.WriteFolded(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkFolded checks the invariants of folded output: one line per
// distinct stack, weights that add up to the profile's.
func checkFolded(t testing.TB, p *Profile, out string) {
	t.Helper()
	var sum int64
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		sp := strings.LastIndexByte(l, ' ')
		if sp < 0 {
			t.Fatalf("folded line without weight: %q", l)
		}
		w, err := strconv.ParseInt(l[sp+1:], 10, 64)
		if err != nil || w < 0 {
			t.Fatalf("folded line with bad weight: %q", l)
		}
		if seen[l[:sp]] {
			t.Fatalf("folded stack twice: %q", l[:sp])
		}
		seen[l[:sp]] = true
		sum = satAdd(sum, w)
	}
	if sum != p.Weight {
		t.Fatalf("folded weights add up to %d, profile weight %d", sum, p.Weight)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

const pe = "relay_server::services::processor::EnvelopeProcessorService::process_envelope"

func TestParseHandWritten(t *testing.T) {
	const cxx = "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)"
	const deser = "<serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_any"
	const uagen = "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic"
	tests := []struct {
		file                      string
		event                     string
		samples, weight           int64
		unknownSamples, unknownWt int64
		folded                    string
		top                       []FuncShare
		groups                    map[string][2]float64 // inclusive, self
	}{
		{
			file:    "hand-cycles.perf.txt",
			event:   "cycles:P",
			samples: 7, weight: 9500,
			unknownSamples: 2, unknownWt: 1200,
			folded: "relay-pool_3;" + pe + ";__futex_abstimed_wait_common;entry_SYSCALL_64_after_hwframe;schedule;__schedule 3000\n" +
				"tokio-runtime-w 700\n" +
				"tokio-runtime-w;[unknown];[relay] 500\n" +
				"tokio-runtime-w;regex_automata::hybrid::search::find_fwd 800\n" +
				"tokio-runtime-w;" + pe + ";[libfoo.so];" + cxx + ";malloc 1500\n" +
				"tokio-runtime-w;" + pe + ";" + uagen + ";relay_ua::parse_user_agent 1000\n" +
				"tokio-runtime-w;" + pe + ";relay_protocol::annotated::Annotated<T>::from_json_bytes;" + deser + ";" + deser + " 2000\n",
			top: []FuncShare{
				{pe, 7500.0 / 95, 0, 7500, 0},
				{"__schedule", 3000.0 / 95, 3000.0 / 95, 3000, 3000},
				{"__futex_abstimed_wait_common", 3000.0 / 95, 0, 3000, 0},
				{"entry_SYSCALL_64_after_hwframe", 3000.0 / 95, 0, 3000, 0},
				{"schedule", 3000.0 / 95, 0, 3000, 0},
				{deser, 2000.0 / 95, 2000.0 / 95, 2000, 2000},
				{"relay_protocol::annotated::Annotated<T>::from_json_bytes", 2000.0 / 95, 0, 2000, 0},
				{"malloc", 1500.0 / 95, 1500.0 / 95, 1500, 1500},
				{"[libfoo.so]", 1500.0 / 95, 0, 1500, 0},
				{cxx, 1500.0 / 95, 0, 1500, 0},
				{"relay_ua::parse_user_agent", 1000.0 / 95, 1000.0 / 95, 1000, 1000},
				{uagen, 1000.0 / 95, 0, 1000, 0},
				{"regex_automata::hybrid::search::find_fwd", 800.0 / 95, 800.0 / 95, 800, 800},
				{"[relay]", 500.0 / 95, 500.0 / 95, 500, 500},
			},
			groups: map[string][2]float64{
				GroupUserAgent:     {1000.0 / 95, 1000.0 / 95},
				GroupPII:           {0, 0},
				GroupNormalization: {1000.0 / 95, 0},
				GroupJSON:          {2000.0 / 95, 2000.0 / 95},
				GroupCompression:   {0, 0},
				GroupSigning:       {0, 0},
				GroupRegex:         {800.0 / 95, 800.0 / 95},
				GroupAllocation:    {1500.0 / 95, 1500.0 / 95},
				GroupKernel:        {3000.0 / 95, 3000.0 / 95},
			},
		},
		{
			file:    "hand-cpuclock.perf.txt",
			event:   "cpu-clock:ppp",
			samples: 7, weight: 7,
			folded: "relay;<alloc::raw_vec::RawVecInner<_>>::reserve::do_reserve_and_handle::<alloc::alloc::Global>;_mi_page_malloc 1\n" +
				"relay;core::ptr::drop_in_place<uaparser::file::RegexFile> 1\n" +
				"relay;relay_server::middlewares::normalize_path::fold_duplicate_slashes 1\n" +
				"relay;relay_server::processing::utils::event::scrub;relay_pii::processor::PiiProcessor::apply_all_rules 1\n" +
				"relay;relay_ua::parse_user_agent 1\n" +
				"relay-pool_3;relay_auth::SecretKey::sign_with_header;<curve25519_dalek::edwards::EdwardsBasepointTable as curve25519_dalek::traits::BasepointTable>::mul_base 1\n" +
				"relay-pool_3;relay_server::services::processor::encode_payload;zstd::stream::write::Encoder<W>::finish;ZSTD_compressBlock_fast 1\n",
			groups: map[string][2]float64{
				GroupUserAgent:     {100.0 / 7, 100.0 / 7},
				GroupPII:           {100.0 / 7, 100.0 / 7},
				GroupNormalization: {0, 0},
				GroupJSON:          {0, 0},
				GroupCompression:   {100.0 / 7, 100.0 / 7},
				GroupSigning:       {100.0 / 7, 100.0 / 7},
				GroupRegex:         {0, 0},
				GroupAllocation:    {100.0 / 7, 100.0 / 7},
				GroupKernel:        {0, 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := parseFile(t, tt.file)
			if p.Event != tt.event || p.Samples != tt.samples || p.Weight != tt.weight ||
				p.UnknownSamples != tt.unknownSamples || p.UnknownWeight != tt.unknownWt {
				t.Errorf("event %q samples %d weight %d unknown %d/%d; want %q %d %d %d/%d",
					p.Event, p.Samples, p.Weight, p.UnknownSamples, p.UnknownWeight,
					tt.event, tt.samples, tt.weight, tt.unknownSamples, tt.unknownWt)
			}
			if p.BadLines != 0 || p.SkippedSamples != 0 || p.TruncatedSamples != 0 {
				t.Errorf("bad %d skipped %d truncated %d, want 0", p.BadLines, p.SkippedSamples, p.TruncatedSamples)
			}
			got := folded(t, p)
			if got != tt.folded {
				t.Errorf("folded:\n%s\nwant:\n%s", got, tt.folded)
			}
			checkFolded(t, p, got)
			if tt.top != nil {
				top := p.Top(0)
				if len(top) != len(tt.top) {
					t.Errorf("Top(0) has %d functions, want %d: %+v", len(top), len(tt.top), top)
				}
				for i := range min(len(top), len(tt.top)) {
					g, w := top[i], tt.top[i]
					if g.Name != w.Name || !near(g.Inclusive, w.Inclusive) || !near(g.Self, w.Self) ||
						g.InclusiveWeight != w.InclusiveWeight || g.SelfWeight != w.SelfWeight {
						t.Errorf("Top[%d] = %+v, want %+v", i, g, w)
					}
				}
				if top5 := p.Top(5); len(top5) != 5 || top5[4] != top[4] {
					t.Errorf("Top(5) = %+v", top5)
				}
			}
			for _, g := range p.Groups(DefaultGroups()) {
				w, ok := tt.groups[g.Name]
				if !ok {
					t.Errorf("unexpected group %q", g.Name)
					continue
				}
				if !near(g.Inclusive, w[0]) || !near(g.Self, w[1]) {
					t.Errorf("group %s: inclusive %.4f self %.4f, want %.4f %.4f", g.Name, g.Inclusive, g.Self, w[0], w[1])
				}
			}
		})
	}
}

// TestParseRecorded parses real perf script output recorded on a 2-CPU VM
// (perf 6.1, cpu-clock): Relay 26.4.0 under orchestrate at 300 errors/s
// with --call-graph dwarf (trimmed to 65 samples; default fields and the
// -F fields Run asks for), a Go program with frame pointers, gzip (a
// stripped binary: every frame [unknown]) with frame pointers and without
// callchains. The folded output must match the golden files; go test
// -update rewrites them.
func TestParseRecorded(t *testing.T) {
	tests := []struct {
		file           string
		event          string
		samples        int64
		unknownSamples int64
	}{
		{"relay-errors.perf.txt", "cpu-clock", 65, 0},
		{"relay-errors.fields.perf.txt", "cpu-clock", 8, 0},
		{"go-flate.perf.txt", "cpu-clock:pppH", 30, 0},
		{"gzip-stripped.perf.txt", "cpu-clock:pppH", 40, 39}, // one sample is a read(2) in the kernel
		{"gzip-nocallchain.perf.txt", "cpu-clock:pppH", 25, 25},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			// An independent count: header lines are the non-blank lines
			// that do not start with a tab.
			var headers int64
			for _, l := range strings.Split(string(raw), "\n") {
				if l != "" && l[0] != '\t' {
					headers++
				}
			}
			if p.Samples != tt.samples || headers != tt.samples || p.UnknownSamples != tt.unknownSamples || p.Event != tt.event {
				t.Errorf("samples %d (headers %d) unknown %d event %q; want %d unknown %d event %q",
					p.Samples, headers, p.UnknownSamples, p.Event, tt.samples, tt.unknownSamples, tt.event)
			}
			if p.BadLines != 0 || p.SkippedSamples != 0 {
				t.Errorf("bad lines %d skipped %d", p.BadLines, p.SkippedSamples)
			}
			got := folded(t, p)
			checkFolded(t, p, got)
			golden := filepath.Join("testdata", strings.TrimSuffix(tt.file, ".perf.txt")+".folded")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("folded output differs from %s (go test -update rewrites it):\n%s", golden, firstDiff(got, string(want)))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n got  " + x + "\n want " + y
		}
	}
	return ""
}

// TestRecordedRelayShares checks Top and the groups on the real Relay
// profile against counts made straight from the text, sample by sample
// (every sample there has the same period).
func TestRecordedRelayShares(t *testing.T) {
	raw, err := os.ReadFile("testdata/relay-errors.perf.txt")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
	count := func(match func(line string) bool) float64 {
		n := 0
		for _, b := range blocks {
			for _, l := range strings.Split(b, "\n")[1:] {
				if match(l) {
					n++
					break
				}
			}
		}
		return 100 * float64(n) / float64(len(blocks))
	}
	has := func(subs ...string) func(string) bool {
		return func(l string) bool {
			for _, s := range subs {
				if strings.Contains(l, s) {
					return true
				}
			}
			return false
		}
	}
	want := map[string]float64{
		GroupUserAgent:   count(has(" uaparser::", "<uaparser::", "relay_ua::", "relay_event_normalization::normalize::user_agent::")),
		GroupPII:         count(has("relay_pii::", "::process::scrub", "::event::scrub")),
		GroupJSON:        count(has("serde_json::", "Annotated<T>::to_json", "Annotated<T>::from_json")),
		GroupCompression: count(has("ZSTD_", "HUF_", "zstd::", "flate2::", "brotli::")),
		GroupSigning:     count(has("relay_auth::", "ed25519", "curve25519")),
		GroupRegex:       count(has(" regex_automata::", "<regex_automata::", " regex::", "<regex::", "aho_corasick::")),
		GroupKernel:      count(has("[kernel.kallsyms]")),
	}
	p := parseFile(t, "relay-errors.perf.txt")
	for _, g := range p.Groups(DefaultGroups()) {
		if w, ok := want[g.Name]; ok && !near(g.Inclusive, w) {
			t.Errorf("group %s: %.4f%%, counted %.4f%%", g.Name, g.Inclusive, w)
		}
	}
	if want[GroupUserAgent] < 20 || want[GroupSigning] == 0 || want[GroupCompression] == 0 {
		t.Errorf("fixture lost its point: %v", want)
	}
	top := p.Top(3)
	const hot = "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic"
	found := false
	for _, f := range p.Top(10) {
		if f.Name == hot {
			found = true
			if w := count(has(hot + "+")); !near(f.Inclusive, w) {
				t.Errorf("%s: %.4f%%, counted %.4f%%", hot, f.Inclusive, w)
			}
		}
	}
	if !found {
		t.Errorf("%s not in Top(10): %+v", hot, p.Top(10))
	}
	for i := 1; i < len(top); i++ {
		if top[i].Inclusive > top[i-1].Inclusive {
			t.Errorf("Top not sorted: %+v", top)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{"empty", "", ErrNoSamples},
		{"only comments", "# ========\n# captured on: x\n#\n", ErrNoSamples},
		{"blank lines", "\n\n  \n", ErrNoSamples},
		{"prose", "hello world\nthis is not perf\n", ErrNotPerfScript},
		{"json", `{"samples": [1, 2, 3]}` + "\n", ErrNotPerfScript},
		{"folded stacks", "relay;main;parse 10\nrelay;main 3\n", ErrNotPerfScript},
		{"perf.data", "PERFILE2h\x00\x00\x00\x00\x00\x00\x00\x01\x02", ErrNotPerfScript},
		{"frames without header", "\t    55d0c8a1b2c3 relay_ua::parse_user_agent+0x123 (/x/relay)\n", ErrNotPerfScript},
		{"a cut frame line alone", "\t    55d0c8a1b2c3 relay_ua::pars", ErrNotPerfScript},
		{"binary", "\x00\x01\x02\x03\xff\xfe\n\x00", ErrNotPerfScript},
		{"perf report", "# Overhead  Command  Shared Object\n    12.34%  relay  relay  [.] parse\n", ErrNotPerfScript},
		{"garbage after a sample", "relay 1 1.000001: 1 cpu-clock: \n\tabc f (/x)\n\n" + strings.Repeat("not perf\n", 1002), ErrNotPerfScript},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tt.input))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse = %v, %v; want an error wrapping %v", p, err, tt.want)
			}
			if p != nil {
				t.Fatalf("profile %+v with error", p)
			}
		})
	}
}

func TestParseTolerates(t *testing.T) {
	const s1 = "relay 1/2 [000] 1.000001:     10 cycles: \n\t  aa f+0x1 (/x/relay)\n\n"
	tests := []struct {
		name                   string
		input                  string
		samples, weight, bad   int64
		unknown, skipped, trun int64
		folded                 string
	}{
		{"header cut short", s1 + "relay 1/2 [0", 1, 10, 0, 0, 0, 0, "relay;f 10\n"},
		{"frame cut short", s1 + "relay 1/2 [000] 1.000002:  20 cycles: \n\t  aa g+0x1 (/x/relay)\n\t  ab h+0x", 2, 30, 0, 0, 0, 0, "relay;f 10\nrelay;g 20\n"},
		{"header without stack at the end", s1 + "relay 1/2 [000] 1.000002:  20 cycles: ", 2, 30, 0, 1, 0, 0, "relay 20\nrelay;f 10\n"},
		{"no final newline", strings.TrimRight(s1, "\n"), 1, 10, 0, 0, 0, 0, "relay;f 10\n"},
		{"CRLF", strings.ReplaceAll(s1, "\n", "\r\n"), 1, 10, 0, 0, 0, 0, "relay;f 10\n"},
		{"junk line between samples", s1 + "Warning: something\n\tzz q (/x)\n\n" + s1, 2, 20, 1, 0, 0, 0, "relay;f 20\n"},
		{"other event skipped", s1 + "relay 1/2 [000] 1.000002:  20 instructions: \n\t  aa g+0x1 (/x/relay)\n\n", 1, 10, 0, 0, 1, 0, "relay;f 10\n"},
		{"period 0", "relay 1 1.000001:  0 cycles: \n\t  aa f (/x/relay)\n\n", 1, 0, 0, 0, 0, 0, "relay;f 0\n"},
		{"huge period capped", "relay 1 1.000001:  99999999999999999999999 cycles: \n\t  aa f (/x/relay)\n\n", 1, maxPeriod, 0, 0, 0, 0, "relay;f 1099511627776\n"},
		{"stack indented with spaces", "relay 1 1.000001: cycles: \n      aa f (/x/relay)\n      ab g (/x/relay)\n", 1, 1, 0, 0, 0, 0, "relay;g;f 1\n"},
		{"leading comm padding without callchain", "           relay 1  1.000001:  5 cpu-clock:  55d0 parse+0x4 (/x/relay)\n            relay 1  1.000002:  5 cpu-clock:  55d1 parse+0x5 (/x/relay)\n", 2, 10, 0, 0, 0, 0, "relay;parse 10\n"},
		{"tracepoint without frame", "relay 1 [001] 1.000001: sched:sched_switch: prev_comm=relay prev_pid=1 ==> next_comm=swapper/1\n", 1, 1, 0, 1, 0, 0, "relay 1\n"},
		{"srcline lines are skipped", "relay 1 1.000001: 1 cycles: \n\t  aa f+0x1 (/x/relay)\n\t  f.rs:12\n", 1, 1, 0, 0, 0, 0, "relay;f.rs:12;f 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if p.Samples != tt.samples || p.Weight != tt.weight || p.BadLines != tt.bad ||
				p.UnknownSamples != tt.unknown || p.SkippedSamples != tt.skipped || p.TruncatedSamples != tt.trun {
				t.Errorf("got %+v", *p)
			}
			got := folded(t, p)
			if got != tt.folded {
				t.Errorf("folded %q, want %q", got, tt.folded)
			}
			checkFolded(t, p, got)
		})
	}
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		line      string
		ok        bool
		comm      string
		event     string
		period    int64
		hasPeriod bool
		tail      string
	}{
		{"relay 12345/12360 [001] 1234.567890:     5050505 cycles:P: ", true, "relay", "cycles:P", 5050505, true, ""},
		{"relay 12345 1234.567890:  10101010 cpu-clock:ppp: ", true, "relay", "cpu-clock:ppp", 10101010, true, ""},
		{"relay 12345 1234.567890: cpu-clock:ppp: ", true, "relay", "cpu-clock:ppp", 0, false, ""},
		{"tokio-runtime-w 12345/12360 [001] 1234.567890: 1 cycles:u: ", true, "tokio-runtime-w", "cycles:u", 1, true, ""},
		{"relay-pool 3 12345/12361 [000] 1234.567990:       3000 cycles:P: ", true, "relay-pool 3", "cycles:P", 3000, true, ""},
		{"a b 7 c 1/2 [3] 4.5: 6 ev: ", true, "a b 7 c", "ev", 6, true, ""},
		{"my 1.5: proc 42 100.000001: 7 cycles: ", true, "my 1.5: proc", "cycles", 7, true, ""},
		{"swapper     0 [000] 1.000000: 1 cpu/event=0x3c,umask=0x0/: ", true, "swapper", "cpu/event=0x3c,umask=0x0/", 1, true, ""},
		{"            gzip 15099  4650.505623:    1001001 cpu-clock:pppH:      55f66f6be313 [unknown] (/usr/bin/gzip)", true, "gzip", "cpu-clock:pppH", 1001001, true, "55f66f6be313 [unknown] (/usr/bin/gzip)"},
		{"relay 1 [001] 1.000001: sched:sched_switch: prev_comm=relay", true, "relay", "sched:sched_switch", 0, false, ""},
		{"relay -1/-1 1.000001: 2 cycles: ", true, "relay", "cycles", 2, true, ""},
		{"relay 12345 1234.567890", false, "", "", 0, false, ""},
		{"12345 1234.567890: cycles: ", false, "", "", 0, false, ""},
		{"relay abc 1234.567890: cycles: ", false, "", "", 0, false, ""},
		{"relay 12345 1234: cycles: ", false, "", "", 0, false, ""},
		{"", false, "", "", 0, false, ""},
	}
	for _, tt := range tests {
		h, ok := parseHeader([]byte(tt.line))
		if ok != tt.ok {
			t.Errorf("parseHeader(%q) ok = %v", tt.line, ok)
			continue
		}
		if !ok {
			continue
		}
		if string(h.comm) != tt.comm || string(h.event) != tt.event || h.period != tt.period || h.hasPeriod != tt.hasPeriod || string(h.tail) != tt.tail {
			t.Errorf("parseHeader(%q) = comm %q event %q period %d/%v tail %q", tt.line, h.comm, h.event, h.period, h.hasPeriod, h.tail)
		}
	}
}

func TestParseFrame(t *testing.T) {
	tests := []struct {
		line    string
		addr    uint64
		hasAddr bool
		sym     string
		dso     string
	}{
		{"\t    55d0c8a1b2c3 relay_ua::parse_user_agent+0x123 (/path/to/relay)", 0x55d0c8a1b2c3, true, "relay_ua::parse_user_agent", "/path/to/relay"},
		{"\tffffffff8a2b3c4d __schedule+0x2d ([kernel.kallsyms])", 0xffffffff8a2b3c4d, true, "__schedule", "[kernel.kallsyms]"},
		{"\t    55d0c8a1b2c3 [unknown] (/path/to/relay)", 0x55d0c8a1b2c3, true, "[unknown]", "/path/to/relay"},
		{"\tffffffffffffffff [unknown] ([unknown])", 0xffffffffffffffff, true, "[unknown]", "[unknown]"},
		{"\t  16d824 __memcpy_avx512_unaligned_erms+0x24 (inlined)", 0x16d824, true, "__memcpy_avx512_unaligned_erms", "inlined"},
		{"\t  aa <serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_any+0x45 (/r)", 0xaa, true, "<serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_any", "/r"},
		{"\t  aa foo(int, char const*) const+0x5a (/usr/lib/libfoo.so (deleted))", 0xaa, true, "foo(int, char const*) const", "/usr/lib/libfoo.so (deleted)"},
		{"\t  aa operator()(int)", 0xaa, true, "operator()(int)", ""},
		{"\t  aa f (/x)\r", 0xaa, true, "f", "/x"},
		{"\t  aa compress/flate.(*compressor).deflate+0xef (/tmp/goflate)", 0xaa, true, "compress/flate.(*compressor).deflate", "/tmp/goflate"},
		{"\t  aa relay_server::f::{{closure}} (/x)", 0xaa, true, "relay_server::f::{{closure}}", "/x"},
		{"\t  aa a+0xzz (/x)", 0xaa, true, "a+0xzz", "/x"},
		{"\t  aa", 0xaa, true, "", ""},
		{"\t  main.go:12", 0, false, "main.go:12", ""},
	}
	for _, tt := range tests {
		addr, has, sym, dso := parseFrame([]byte(tt.line))
		if addr != tt.addr || has != tt.hasAddr || string(sym) != tt.sym || string(dso) != tt.dso {
			t.Errorf("parseFrame(%q) = %x %v %q %q", tt.line, addr, has, sym, dso)
		}
	}
}

func TestFrameNames(t *testing.T) {
	in := "relay 1 1.000001: 1 cycles: \n" +
		"\tffffffff8a2b3c4d [unknown] ([kernel.kallsyms])\n" +
		"\tffffffffc0a00010 xfs_iread+0x10 ([xfs])\n" +
		"\t7ffd1234 __vdso_clock_gettime+0x10 ([vdso])\n" +
		"\t55 _ZN8relay_ua16parse_user_agent17h0123456789abcdefE+0x123 (/x/relay)\n" +
		"\t56 a;b (/x/relay)\n" +
		"\t57 _ZN3foo3barEv (/x/libfoo.so)\n"
	p, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Frame{
		"[kernel.kallsyms]":          {"[kernel.kallsyms]", "[kernel.kallsyms]", true},
		"xfs_iread":                  {"xfs_iread", "[xfs]", true},
		"__vdso_clock_gettime":       {"__vdso_clock_gettime", "[vdso]", false},
		"relay_ua::parse_user_agent": {"relay_ua::parse_user_agent", "relay", false},
		"a:b":                        {"a:b", "relay", false},
		"_ZN3foo3barEv":              {"_ZN3foo3barEv", "libfoo.so", false},
	}
	if len(p.Frames()) != len(want) {
		t.Errorf("frames %+v", p.Frames())
	}
	for _, f := range p.Frames() {
		if want[f.Name] != f {
			t.Errorf("frame %+v, want %+v", f, want[f.Name])
		}
	}
	if p.UnknownSamples != 0 {
		t.Errorf("unknown %d", p.UnknownSamples)
	}
}

func TestLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("relay 1 1.000001: 1 cycles: \n")
	for i := range MaxDepth + 10 {
		b.WriteString("\t  aa f" + strconv.Itoa(i) + " (/x/relay)\n")
	}
	b.WriteString("\nrelay 1 1.000002: 1 cycles: \n\t  aa " + strings.Repeat("x", 2*MaxLine) + " (/x/relay)\n\t  ab caller (/x/relay)\n")
	p, err := Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if p.Samples != 2 || p.TruncatedSamples != 1 {
		t.Fatalf("samples %d truncated %d", p.Samples, p.TruncatedSamples)
	}
	depth := 0
	longest := 0
	for _, s := range p.stacks {
		depth = max(depth, int(s.n))
		for _, f := range p.arena[s.off : s.off+s.n] {
			longest = max(longest, len(p.frames[f].Name))
		}
	}
	if depth != MaxDepth {
		t.Errorf("deepest stack %d frames, want %d", depth, MaxDepth)
	}
	if longest != MaxName {
		t.Errorf("longest name %d bytes, want %d", longest, MaxName)
	}
	out := folded(t, p)
	if !strings.Contains(out, "relay;f1023;f1022;") || strings.Contains(out, "f1024") {
		t.Errorf("the innermost frames were not kept")
	}
	if !strings.Contains(out, "relay;caller;xxx") {
		t.Errorf("the long line's caller was lost: %.100q", out)
	}
}

func TestDemangleRust(t *testing.T) {
	tests := []struct{ in, want string }{
		{"_ZN8relay_ua16parse_user_agent17h0123456789abcdefE", "relay_ua::parse_user_agent"},
		{"_ZN25relay_event_normalization9normalize10user_agent33normalize_user_agent_info_generic17h439b784f74d0b6fbE", "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic"},
		{"_ZN81_$LT$serde_json..de..Deserializer$LT$R$GT$$u20$as$u20$serde..de..Deserializer$GT$15deserialize_any17h0123456789abcdefE", "<serde_json::de::Deserializer<R> as serde::de::Deserializer>::deserialize_any"},
		{"_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE", "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"},
		{"_ZN3foo3bar17h0123456789abcdefE.llvm.1234", "foo::bar"},
		{"_ZN3foo3bar17h0123456789abcdefE.cold", "foo::bar.cold"},
		{"_ZN3foo3barEv", ""},                // C++
		{"_ZN3foo", ""},                      // cut
		{"_ZN99foo17h0123456789abcdefE", ""}, // bad length
		{"_ZN3f$o17h0123456789abcdefE", ""},  // bad escape
		{"_ZNE", ""},
	}
	for _, tt := range tests {
		got, ok := demangleRust([]byte(tt.in), nil)
		if !ok {
			got = nil
		}
		if string(got) != tt.want {
			t.Errorf("demangleRust(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
