package blast

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for s, want := range map[string]float64{"max": 0, "MAX": 0, "1000": 1000, "0.5": 0.5, "2e4": 20000, "1e7": MaxRate, "0.001": MinRate} {
		if got, err := ParseRate(s); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "-1", "0", "NaN", "Inf", "fast", "10/s", "1e300", "1e9", "10000000.5", "1e-9", "0.0009"} {
		_, err := ParseRate(s)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("ParseRate(%q) accepted", s)
		} else if !strings.Contains(err.Error(), "want a rate from 0.001 to 10000000 requests/s, or max") {
			t.Errorf("ParseRate(%q): %v, want the limits named", s, err)
		}
	}
}

func TestParseShard(t *testing.T) {
	if i, n, err := ParseShard("2/3"); err != nil || i != 2 || n != 3 {
		t.Errorf("2/3: %d %d %v", i, n, err)
	}
	for _, s := range []string{"", "3/3", "-1/2", "1", "a/b", "1/0", "0/-1", "1/2/3"} {
		if _, _, err := ParseShard(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseShard(%q) accepted", s)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for s, want := range map[string]string{
		"http://127.0.0.1:3000":    "http://127.0.0.1:3000",
		"http://127.0.0.1:3000/":   "http://127.0.0.1:3000",
		"http://localhost":         "http://localhost:80",
		"http://[::1]:3000/relay/": "http://[::1]:3000/relay",
	} {
		u, err := ParseTarget(s)
		if err != nil || u.String() != want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %s", s, u, err, want)
		}
	}
	for _, s := range []string{"", "127.0.0.1:3000", "https://x", "ftp://x", "http://", "http://u:p@x", "http://x/?q=1", "::"} {
		if _, err := ParseTarget(s); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseTarget(%q) accepted", s)
		}
	}
}

func FuzzParseShard(f *testing.F) {
	f.Add("0/1")
	f.Add("3/2")
	f.Fuzz(func(t *testing.T, s string) {
		i, n, err := ParseShard(s)
		if err == nil && (n < 1 || i < 0 || i >= n) {
			t.Fatalf("%q → %d/%d", s, i, n)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1000", "max", "1e300", "1e9", "1e-9", "10000000", "0.001", "1e7.0000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err == nil && !(r >= MinRate && r <= MaxRate || r == 0 && (s == "max" || len(s) == 3)) {
			t.Fatalf("%q → %v", s, r)
		}
	})
}

func FuzzParseTarget(f *testing.F) {
	f.Add("http://127.0.0.1:3000")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseTarget(s)
		if err == nil && (u.Scheme != "http" || u.Host == "" || u.Port() == "") {
			t.Fatalf("%q → %v", s, u)
		}
	})
}

func TestFetchProjects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/projects":
			w.Write([]byte(`[{"id":1,"org_id":1,"slug":"a-1","public_key":"0123456789abcdef0123456789abcdef","key_id":100000,"dsn":"http://x@h/1"}]`))
		case "/empty":
			w.Write([]byte(`[]`))
		case "/bad":
			w.Write([]byte(`{`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ps, err := FetchProjects(context.Background(), srv.URL+"/projects")
	if err != nil || len(ps) != 1 || ps[0].ID != 1 || ps[0].PublicKey != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("%+v %v", ps, err)
	}
	for _, p := range []string{"/empty", "/bad", "/missing"} {
		if _, err := FetchProjects(context.Background(), srv.URL+p); err == nil {
			t.Errorf("%s accepted", p)
		}
	}
	for _, u := range []string{"", "ftp://127.0.0.1/projects", "127.0.0.1:1/projects", "http://"} {
		if _, err := FetchProjects(context.Background(), u); !errors.Is(err, ErrConfig) {
			t.Errorf("FetchProjects(%q): %v, want ErrConfig", u, err)
		}
	}
}

func FuzzParseProjects(f *testing.F) {
	f.Add([]byte(`[{"id":1,"org_id":1,"slug":"a-1","public_key":"0123456789abcdef0123456789abcdef","key_id":100000}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"id":0}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parseProjects(b)
		if err != nil {
			return
		}
		if len(ps) == 0 {
			t.Fatal("empty list accepted")
		}
		for _, p := range ps {
			if p.ID <= 0 || p.PublicKey == "" {
				t.Fatalf("project %+v accepted", p)
			}
			_ = p.AuthHeader(DefaultSDKClient) // what Run does with it
			_ = p.EnvelopePath()
		}
	})
}
