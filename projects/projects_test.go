package projects

import (
	"regexp"
	"testing"
)

func TestGenerateDeterministicAndPrefixStable(t *testing.T) {
	a, err := Generate(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(1, 100)
	small, _ := Generate(1, 10)
	other, _ := Generate(2, 100)
	hexKey := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("project %d differs between runs: %+v vs %+v", i, a[i], b[i])
		}
		if i < len(small) && small[i] != a[i] {
			t.Fatalf("project %d depends on the count: %+v vs %+v", i, small[i], a[i])
		}
		if !hexKey.MatchString(a[i].PublicKey) {
			t.Fatalf("bad key %q", a[i].PublicKey)
		}
		if seen[a[i].PublicKey] {
			t.Fatalf("duplicate key %q", a[i].PublicKey)
		}
		seen[a[i].PublicKey] = true
		if a[i].ID != int64(i+1) || a[i].OrgID != int64(i/10+1) {
			t.Fatalf("ids of project %d: %+v", i, a[i])
		}
	}
	if other[0].PublicKey == a[0].PublicKey {
		t.Fatal("seed does not change keys")
	}
}

func TestGenerateRejectsBadCounts(t *testing.T) {
	for _, n := range []int{0, -1, MaxProjects + 1} {
		if _, err := Generate(1, n); err == nil {
			t.Errorf("Generate(1, %d) accepted", n)
		}
	}
}

func TestDSNAndAuth(t *testing.T) {
	p := Project{ID: 42, PublicKey: "31a5a894b4524f74a9a8d0e27e21ba91"}
	tests := []struct {
		origin, want string
		ok           bool
	}{
		{"http://127.0.0.1:3000", "http://31a5a894b4524f74a9a8d0e27e21ba91@127.0.0.1:3000/42", true},
		{"https://[::1]:9000/", "https://31a5a894b4524f74a9a8d0e27e21ba91@[::1]:9000/42", true},
		{"127.0.0.1:3000", "", false},
		{"ftp://x", "", false},
	}
	for _, tt := range tests {
		got, err := p.DSN(tt.origin)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("DSN(%q) = %q, %v; want %q ok=%v", tt.origin, got, err, tt.want, tt.ok)
		}
	}
	if k := ParseAuthKey(p.AuthHeader("blast/1")); k != p.PublicKey {
		t.Errorf("ParseAuthKey round trip = %q", k)
	}
	for h, want := range map[string]string{
		"sentry sentry_version=7,sentry_key=abc": "abc",
		"Basic abc":                              "",
		"Sentry sentry_version=7":                "",
		"":                                       "",
	} {
		if got := ParseAuthKey(h); got != want {
			t.Errorf("ParseAuthKey(%q) = %q, want %q", h, got, want)
		}
	}
	if p.EnvelopePath() != "/api/42/envelope/" {
		t.Error(p.EnvelopePath())
	}
	idx := NewIndex([]Project{p})
	if idx[p.PublicKey] != 0 {
		t.Error("index")
	}
}

func FuzzParseAuthKey(f *testing.F) {
	f.Add("Sentry sentry_key=abc, sentry_version=7")
	f.Add("sentry ,,=,sentry_key=")
	f.Fuzz(func(t *testing.T, h string) {
		_ = ParseAuthKey(h)
	})
}
