package upstreamflag

import (
	"testing"

	"github.com/relayload/relayload/internal/capture"
)

func TestParseCaptureMax(t *testing.T) {
	const def, defBytes = capture.DefaultMaxCount, capture.DefaultMaxBytes
	tests := []struct {
		spec  string
		count int
		size  int64
		ok    bool
	}{
		{"10000", 10000, defBytes, true},
		{"10000,1GiB", 10000, 1 << 30, true},
		{",512MiB", def, 512 << 20, true},
		{" 7 , 1KiB ", 7, 1 << 10, true},
		{"99999999", 99_999_999, defBytes, true},
		{"1,1", 1, 1, true},
		{"", 0, 0, false},
		{",", 0, 0, false},
		{"10000,", 0, 0, false},
		{"0", 0, 0, false},
		{"-5", 0, 0, false},
		{"100000000", 0, 0, false},
		{"1e4", 0, 0, false},
		{"10000,lots", 0, 0, false},
		{"10000,0", 0, 0, false},
		{"10000,1GiB,2", 0, 0, false},
		{"1GiB", 0, 0, false},
	}
	for _, tc := range tests {
		n, sz, err := ParseCaptureMax(tc.spec)
		if (err == nil) != tc.ok || tc.ok && (n != tc.count || sz != tc.size) {
			t.Errorf("ParseCaptureMax(%q) = %d, %d, %v; want %d, %d ok=%v", tc.spec, n, sz, err, tc.count, tc.size, tc.ok)
		}
	}
}

func FuzzParseCaptureMax(f *testing.F) {
	for _, s := range []string{"10000", "10000,1GiB", ",512MiB", "", ",", "0", "1,1", "99999999,1099511627776", "1,,1", " 3 ,2KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, sz, err := ParseCaptureMax(s)
		if err != nil {
			return
		}
		if n < 1 || n > MaxCaptureCount || sz <= 0 || sz > 1<<40 {
			t.Fatalf("%q: accepted %d envelopes, %d bytes", s, n, sz)
		}
		if _, err := capture.New(capture.Config{Dir: t.TempDir(), MaxCount: n, MaxBytes: sz}); err != nil {
			t.Fatalf("%q: parsed %d, %d but capture.New says %v", s, n, sz, err)
		}
	})
}
