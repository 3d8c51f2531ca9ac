package profile

import (
	"slices"
	"testing"
)

func TestOwnerText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"relay_ua::parse_user_agent", "relay_ua::parse_user_agent"},
		{"<&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_any",
			"<&mut serde_json::de::Deserializer as serde_core::de::Deserializer>::deserialize_any"},
		{"core::ptr::drop_in_place<uaparser::file::RegexFile>", "core::ptr::drop_in_place"},
		{"<alloc::raw_vec::RawVecInner<_>>::reserve::do_reserve_and_handle::<alloc::alloc::Global>",
			"<alloc::raw_vec::RawVecInner>::reserve::do_reserve_and_handle"},
		{"relay_protocol::impls::<impl relay_protocol::traits::IntoValue for alloc::vec::Vec<relay_protocol::annotated::Annotated<T>>>::serialize_payload",
			"relay_protocol::impls::<impl relay_protocol::traits::IntoValue for alloc::vec::Vec>::serialize_payload"},
		{"<<relay_protocol::value::Value as serde_core::de::Deserialize>::deserialize::ValueVisitor as serde_core::de::Visitor>::visit_map",
			"<<relay_protocol::value::Value as serde_core::de::Deserialize>::deserialize::ValueVisitor as serde_core::de::Visitor>::visit_map"},
		{"std::vector<int, std::allocator<int> >::push_back(int const&)", "std::vector::push_back(int const&)"},
		{"a>b<", "a>b"},
	}
	for _, tt := range tests {
		if got := ownerText(tt.in); got != tt.want {
			t.Errorf("ownerText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHasPath(t *testing.T) {
	tests := []struct {
		own, path string
		want      bool
	}{
		{"serde_json::de::from_slice", "serde_json::", true},
		{"<&mut serde_json::de::Deserializer as serde::de::Deserializer>::f", "serde_json::", true},
		{"my_serde_json::f", "serde_json::", false},
		{"foo::serde_json::f", "serde_json::", false},
		{"relay_event_normalization::eap::normalize_user_agent", "relay_event_normalization::eap::normalize_user_agent", true},
		{"relay_event_normalization::eap::normalize_user_agent::{{closure}}", "relay_event_normalization::eap::normalize_user_agent", true},
		{"relay_event_normalization::eap::normalize_user_agent_x", "relay_event_normalization::eap::normalize_user_agent", false},
		{"__rustc::__rust_alloc", "__rust_alloc", false},
		{"__rust_alloc_zeroed", "__rust_alloc", false},
		{"__rust_alloc", "__rust_alloc", true},
	}
	for _, tt := range tests {
		if got := hasPath(tt.own, tt.path); got != tt.want {
			t.Errorf("hasPath(%q, %q) = %v", tt.own, tt.path, got)
		}
	}
}

// TestDefaultGroupsMatch checks the default groups on names taken from
// Relay 26.4.0's binary and from perf script output of it.
func TestDefaultGroupsMatch(t *testing.T) {
	tests := []struct {
		frame Frame
		want  []string
	}{
		{Frame{Name: "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic"}, []string{GroupUserAgent, GroupNormalization}},
		{Frame{Name: "<relay_event_schema::protocol::contexts::browser::BrowserContext as relay_event_normalization::normalize::user_agent::FromUserAgentInfo>::parse_user_agent"}, []string{GroupUserAgent, GroupNormalization}},
		{Frame{Name: "<uaparser::parser::device::Matcher as uaparser::SubParser>::try_parse"}, []string{GroupUserAgent}},
		{Frame{Name: "relay_ua::parse_user_agent"}, []string{GroupUserAgent}},
		{Frame{Name: "relay_event_normalization::eap::normalize_user_agent::{{closure}}"}, []string{GroupUserAgent, GroupNormalization}},
		{Frame{Name: "core::ptr::drop_in_place<uaparser::file::RegexFile>"}, nil},
		{Frame{Name: "<relay_event_normalization::normalize::user_agent::_::<impl serde_core::de::Deserialize for relay_event_normalization::normalize::user_agent::ClientHints<S>>::deserialize::__FieldVisitor as serde_core::de::Visitor>::visit_str"}, []string{GroupUserAgent, GroupNormalization}},
		{Frame{Name: "relay_filter::interface::user_agent_from_attributes"}, nil},
		{Frame{Name: "relay_pii::processor::PiiProcessor::apply_all_rules"}, []string{GroupPII}},
		{Frame{Name: "<relay_pii::processor::PiiProcessor as relay_event_schema::processor::traits::Processor>::process_string"}, []string{GroupPII}},
		{Frame{Name: "relay_server::processing::utils::event::scrub::{{closure}}"}, []string{GroupPII}},
		{Frame{Name: "relay_server::processing::replays::process::scrub_recordings"}, []string{GroupPII}},
		{Frame{Name: "relay_server::processing::errors::process::normalize"}, []string{GroupNormalization}},
		{Frame{Name: "relay_server::processing::spans::process::normalize_span"}, []string{GroupNormalization}},
		{Frame{Name: "relay_server::middlewares::normalize_path::fold_duplicate_slashes"}, nil},
		{Frame{Name: "relay_event_normalization::event::normalize"}, []string{GroupNormalization}},
		{Frame{Name: "relay_event_schema::processor::funcs::process_value"}, nil},
		{Frame{Name: "<&mut serde_json::de::Deserializer<R> as serde_core::de::Deserializer>::deserialize_option"}, []string{GroupJSON}},
		{Frame{Name: "serde_json::ser::format_escaped_str_contents"}, []string{GroupJSON}},
		{Frame{Name: "relay_protocol::annotated::Annotated<T>::to_json"}, []string{GroupJSON}},
		{Frame{Name: "relay_protocol::annotated::Annotated<T>::from_json_bytes"}, []string{GroupJSON}},
		{Frame{Name: "<relay_protocol::value::Value as serde_core::de::Deserialize>::deserialize"}, nil},
		{Frame{Name: "ZSTD_compressBlock_fast"}, []string{GroupCompression}},
		{Frame{Name: "HUF_compress4X_repeat"}, []string{GroupCompression}},
		{Frame{Name: "zstd::stream::write::Encoder<W>::finish"}, []string{GroupCompression}},
		{Frame{Name: "miniz_oxide::deflate::core::compress_inner"}, []string{GroupCompression}},
		{Frame{Name: "core::ptr::drop_in_place<flate2::deflate::bufread::DeflateDecoder<flate2::bufreader::BufReader<std::io::cursor::Cursor<bytes::bytes::Bytes>>>>"}, nil},
		{Frame{Name: "brotli::enc::backward_references::hq::zopfli_compute_shortest_path"}, []string{GroupCompression}},
		{Frame{Name: "<async_compression::tokio::bufread::ZlibEncoder<B> as tokio::io::AsyncRead>::poll_read"}, []string{GroupCompression}},
		{Frame{Name: "inflate", DSO: "libz.so.1.2.13"}, []string{GroupCompression}},
		{Frame{Name: "inflate", DSO: "relay"}, nil},
		{Frame{Name: "relay_auth::SecretKey::sign_with_header"}, []string{GroupSigning}},
		{Frame{Name: "<ed25519_dalek::signing::SigningKey as signature::signer::Signer<ed25519::Signature>>::try_sign"}, []string{GroupSigning}},
		{Frame{Name: "<curve25519_dalek::edwards::EdwardsBasepointTable as curve25519_dalek::traits::BasepointTable>::mul_base"}, []string{GroupSigning}},
		{Frame{Name: "sha2::sha512::x86::sha512_compress_x86_64_avx2"}, nil},
		{Frame{Name: "regex_automata::hybrid::search::find_fwd"}, []string{GroupRegex}},
		{Frame{Name: "<regex_automata::meta::strategy::Core as regex_automata::meta::strategy::Strategy>::search_slots"}, []string{GroupRegex}},
		{Frame{Name: "<regex::regex::string::CaptureMatches as core::iter::traits::iterator::Iterator>::next"}, []string{GroupRegex}},
		{Frame{Name: "aho_corasick::packed::rabinkarp::RabinKarp::verify"}, []string{GroupRegex}},
		{Frame{Name: "fancy_regex::Regex::is_match"}, []string{GroupRegex}},
		{Frame{Name: "_mi_page_malloc"}, []string{GroupAllocation}},
		{Frame{Name: "mi_heap_malloc_zero_aligned_at_overalloc"}, []string{GroupAllocation}},
		{Frame{Name: "_rjem_je_malloc_default"}, []string{GroupAllocation}},
		{Frame{Name: "malloc"}, []string{GroupAllocation}},
		{Frame{Name: "free"}, []string{GroupAllocation}},
		{Frame{Name: "__libc_malloc"}, []string{GroupAllocation}},
		{Frame{Name: "_int_free"}, []string{GroupAllocation}},
		{Frame{Name: "__rust_alloc"}, []string{GroupAllocation}},
		{Frame{Name: "__rustc::__rust_dealloc"}, []string{GroupAllocation}},
		{Frame{Name: "alloc::raw_vec::RawVecInner<A>::finish_grow"}, []string{GroupAllocation}},
		{Frame{Name: "<alloc::raw_vec::RawVecInner<_>>::reserve::do_reserve_and_handle::<alloc::alloc::Global>"}, []string{GroupAllocation}},
		{Frame{Name: "<mimalloc::MiMalloc as core::alloc::global::GlobalAlloc>::alloc"}, []string{GroupAllocation}},
		{Frame{Name: "alloc::collections::btree::map::BTreeMap<K,V,A>::insert"}, nil},
		{Frame{Name: "<u8 as <[_]>::to_vec_in::ConvertVec>::to_vec::<alloc::alloc::Global>"}, nil},
		{Frame{Name: "freeaddrinfo"}, nil},
		{Frame{Name: "__memmove_avx512_unaligned_erms"}, nil},
		{Frame{Name: "__schedule", DSO: "[kernel.kallsyms]", Kernel: true}, []string{GroupKernel}},
		{Frame{Name: "tokio::runtime::task::harness::Harness<T,S>::poll"}, nil},
	}
	gs := DefaultGroups()
	for _, tt := range tests {
		var got []string
		for _, g := range gs {
			if g.Match(tt.frame) {
				got = append(got, g.Name)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: groups %v, want %v", tt.frame.Name, got, tt.want)
		}
	}
	seen := map[string]bool{}
	for _, g := range gs {
		if g.Name == "" || g.Desc == "" || g.Match == nil || seen[g.Name] {
			t.Errorf("group %+v: name, description and matcher needed, names distinct", g)
		}
		seen[g.Name] = true
		if _, ok := families[g.Name]; !ok {
			t.Errorf("group %s has no color family", g.Name)
		}
	}
}

func TestGroupsCustom(t *testing.T) {
	p := parseFile(t, "hand-cycles.perf.txt")
	gs := p.Groups([]Group{
		{Name: "envelope", Match: func(f Frame) bool { return f.Name == pe }},
		{Name: "none"},
	})
	if len(gs) != 2 || gs[0].Samples != 4 || gs[0].InclusiveWeight != 7500 || gs[0].SelfWeight != 0 || gs[1].Samples != 0 {
		t.Errorf("Groups = %+v", gs)
	}
}

func TestPrefixGroup(t *testing.T) {
	g := PrefixGroup("upstream", "the fake upstream", "github.com/relayload/relayload/upstream.", "net/http.")
	for name, want := range map[string]bool{
		"github.com/relayload/relayload/upstream.(*Server).handleEnvelope": true,
		"net/http.(*conn).serve":                     true,
		"vendor/golang.org/x/net/http/httpguts.Foo":  false,
		"golang.org/x/net/http2.(*Framer).ReadFrame": false,
		"runtime.findRunnable":                       false,
	} {
		if got := g.Match(Frame{Name: name}); got != want {
			t.Errorf("%s: %v", name, got)
		}
	}
	if g.Name != "upstream" || g.Desc != "the fake upstream" {
		t.Errorf("%+v", g)
	}
}
