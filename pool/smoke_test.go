package pool

import (
	"context"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/projects"
)

func TestSmoke(t *testing.T) {
	ps, _ := projects.Generate(1, 10)
	p, err := Build(context.Background(), Options{Seed: 1, Size: 200, Projects: ps, Now: time.Unix(1767225600, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Entries {
		if _, err := envelope.Parse(p.Raw(i)); err != nil {
			t.Fatal(i, err)
		}
	}
	t.Log(p.Stats())
}
