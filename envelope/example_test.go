package envelope_test

import (
	"errors"
	"fmt"

	"github.com/relayload/relayload/envelope"
)

func ExampleParse() {
	in := []byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}` + "\n" +
		`{"type":"attachment","length":11,"filename":"a.txt"}` + "\nline1\nline2\n" +
		`{"type":"session"}` + "\n" + `{"status":"ok"}` + "\n")
	e, err := envelope.Parse(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.EventID)
	for _, it := range e.Items {
		fmt.Printf("%s %q\n", it.Type, it.Payload)
	}
	// Output:
	// 9ec79c33ec9942ab8353589fcb2e04dc
	// attachment "line1\nline2"
	// session "{\"status\":\"ok\"}"
}

func ExampleParse_error() {
	_, err := envelope.Parse([]byte("{}\r\n"))
	var perr *envelope.ParseError
	if errors.As(err, &perr) {
		fmt.Println(perr.Offset, perr.Rule == envelope.RuleMissingNewline)
	}
	fmt.Println(err)
	// Output:
	// 2 true
	// envelope: offset 2: missing newline after header or payload (byte '\r' after envelope header, want LF)
}

func ExampleScan() {
	in := []byte("{}\n" + `{"type":"log","item_count":2,"content_type":"application/vnd.sentry.items.log+json"}` + "\n" + `{"items":[{},{}]}`)
	var s envelope.Summary // reuse across calls: no allocation once warm
	if err := envelope.Scan(in, &s); err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range s.Items {
		fmt.Printf("%s x%d: %s\n", it.Type, it.ItemCount, in[it.PayloadStart:it.PayloadEnd])
	}
	// Output:
	// log x2: {"items":[{},{}]}
}

func ExampleEnvelope_Marshal() {
	e := &envelope.Envelope{
		Header: []byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}`),
		Items: []envelope.Item{
			{Type: "event", ContentType: "application/json", Payload: []byte(`{"message":"hi"}`)},
			{Type: "attachment", Payload: []byte("x\ny"), Extra: map[string]any{"filename": "f.txt"}},
		},
	}
	fmt.Printf("%s", e.Marshal())
	// Output:
	// {"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}
	// {"type":"event","length":16,"content_type":"application/json"}
	// {"message":"hi"}
	// {"type":"attachment","length":3,"filename":"f.txt"}
	// x
	// y
}
