package relayconfig

import (
	"slices"
	"testing"
)

func TestUnknownSections(t *testing.T) {
	c, err := ParseOverrides([]byte("relya:\n  port: 1\nlimits: {shutdown_timeout: 0}\nspoool: {}\nzzz_custom: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := UnknownSections(c); !slices.Equal(got, []string{"relya", "spoool", "zzz_custom"}) {
		t.Errorf("UnknownSections = %q", got)
	}
	for key, want := range map[string]string{
		"relya":      `top-level key "relya" is not one of Relay 26.4.0's config sections, and Relay ignores it (did you mean "relay"?)`,
		"spoool":     `top-level key "spoool" is not one of Relay 26.4.0's config sections, and Relay ignores it (did you mean "spool"?)`,
		"zzz_custom": `top-level key "zzz_custom" is not one of Relay 26.4.0's config sections, and Relay ignores it (they are relay, http, cache, spool, limits, logging, routing, metrics, sentry, processing, outcomes, aggregator, secondary_aggregators, auth, geoip, normalization, cardinality_limiter, health, cogs, upload)`,
	} {
		if got := UnknownSection(key); got != want {
			t.Errorf("UnknownSection(%q) =\n%s\nwant\n%s", key, got, want)
		}
	}
	// What Default writes is all Relay's.
	if got := UnknownSections(Default(Options{Upstream: "http://127.0.0.1:1/", Host: "127.0.0.1", Port: 1, StatsD: "127.0.0.1:2", Threads: 2})); len(got) != 0 {
		t.Errorf("Default has unknown sections %q", got)
	}
}
