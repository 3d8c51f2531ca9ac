package upstream_test

import (
	"bytes"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// A fake upstream on a free loopback port, a relay registered with real
// keys, and one envelope forwarded as Relay forwards it: the relay's id and
// its signature over empty data, beside the SDK's X-Sentry-Auth.
func Example() {
	ps, err := projects.Generate(1, 3)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := upstream.Start(upstream.Config{Projects: ps, VerifySignatures: true})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		log.Fatal(err)
	}
	sk, pub, err := creds.Keys()
	if err != nil {
		log.Fatal(err)
	}
	srv.RegisterRelay(creds.ID, pub)

	p := ps[0]
	env := envelope.Envelope{
		Header: []byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}`),
		Items:  []envelope.Item{{Type: "event", Payload: []byte(`{"message":"hello"}`)}},
	}
	req, err := http.NewRequest("POST", srv.URL+p.EnvelopePath(), bytes.NewReader(env.Marshal()))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-sentry-envelope")
	req.Header.Set("X-Sentry-Auth", p.AuthHeader("example/1.0"))
	req.Header.Set("X-Sentry-Relay-Id", creds.ID)
	req.Header.Set("X-Sentry-Relay-Signature", sk.Sign(nil, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()

	st := srv.Stats()
	fmt.Println("status:", resp.StatusCode)
	fmt.Println("envelopes from relays:", st.EnvelopesBySender["relay"])
	fmt.Println("events:", st.ItemsByType["event"])
	fmt.Println("signatures verified:", st.Signatures.Verified)
	// Output:
	// status: 200
	// envelopes from relays: 1
	// events: 1
	// signatures verified: 1
}
