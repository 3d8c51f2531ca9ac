package envelope

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchEnvelope builds a realistic envelope of about 10 KB with five items:
// an error event (~6 KB of JSON), a binary attachment, a session, a client
// report and a log container. With withLength false the JSON items carry no
// "length", as the JavaScript SDK writes them; the attachment keeps its length.
func benchEnvelope(withLength bool) []byte {
	frames := make([]map[string]any, 0, 10)
	for i := range 10 {
		frames = append(frames, map[string]any{
			"filename": fmt.Sprintf("shop/services/module_%02d.py", i), "abs_path": fmt.Sprintf("/srv/app/shop/services/module_%02d.py", i),
			"function": fmt.Sprintf("handle_step_%d", i), "module": fmt.Sprintf("shop.services.module_%02d", i),
			"lineno": 40 + i, "colno": 9, "in_app": i > 3,
			"pre_context":  []string{"    def handle(self, request):", "        order = self.load(request)"},
			"context_line": "        result = self.process(order, request.user)",
			"post_context": []string{"        return result"},
			"vars":         map[string]any{"self": "<OrderService>", "order_id": 1000 + i},
		})
	}
	crumbs := make([]map[string]any, 0, 6)
	for i := range 6 {
		crumbs = append(crumbs, map[string]any{"timestamp": 1767225590.0 + float64(i), "category": "http", "type": "http", "level": "info",
			"data": map[string]any{"method": "GET", "url": fmt.Sprintf("https://api.example.com/v1/items/%d", i), "status_code": 200}})
	}
	event, _ := json.Marshal(map[string]any{
		"event_id": "5f1b2c3d4e5f40718293a4b5c6d7e8f9", "timestamp": 1767225600.125, "platform": "python", "level": "error",
		"logger": "django.request", "server_name": "web-3", "release": "shop@2.3.1", "environment": "production", "transaction": "/cart/add",
		"exception": map[string]any{"values": []any{map[string]any{"type": "KeyError", "value": "'sku'", "module": "builtins",
			"mechanism": map[string]any{"type": "django", "handled": false}, "stacktrace": map[string]any{"frames": frames}}}},
		"breadcrumbs": map[string]any{"values": crumbs},
		"request":     map[string]any{"url": "https://shop.example.com/cart/add", "method": "POST", "headers": map[string]any{"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:131.0) Gecko/20100101 Firefox/131.0", "Accept": "application/json"}},
		"user":        map[string]any{"id": "u-1042", "ip_address": "{{auto}}"},
		"contexts":    map[string]any{"trace": map[string]any{"trace_id": "771a43a4192642f0b136d5159a501700", "span_id": "a1b2c3d4e5f60718", "op": "http.server"}, "runtime": map[string]any{"name": "CPython", "version": "3.12.4"}},
		"sdk":         map[string]any{"name": "sentry.python.django", "version": "2.19.0"},
	})
	attachment := make([]byte, 2048)
	for i := range attachment {
		attachment[i] = byte(i * 7) // includes LF bytes: needs "length"
	}
	session := []byte(`{"sid":"7c7b6e5d-4c3b-4a29-8817-161514131211","did":"u-1042","seq":0,"init":true,"started":"2026-01-01T00:00:00Z","timestamp":"2026-01-01T00:00:00Z","status":"errored","errors":1,"attrs":{"release":"shop@2.3.1","environment":"production"}}`)
	report := []byte(`{"timestamp":1767225600,"discarded_events":[{"reason":"queue_overflow","category":"error","quantity":3},{"reason":"sample_rate","category":"transaction","quantity":12}]}`)
	logs := []byte(`{"items":[`)
	for i := range 4 {
		if i > 0 {
			logs = append(logs, ',')
		}
		logs = fmt.Appendf(logs, `{"timestamp":%d.5,"trace_id":"771a43a4192642f0b136d5159a501700","level":"info","body":"cart updated for user %d","attributes":{"sentry.environment":{"value":"production","type":"string"},"cart.size":{"value":%d,"type":"integer"}}}`, 1767225600+i, i, i+1)
	}
	logs = append(logs, "]}"...)

	header := []byte(`{"event_id":"5f1b2c3d4e5f40718293a4b5c6d7e8f9","sent_at":"2026-01-01T00:00:01.250Z","sdk":{"name":"sentry.python.django","version":"2.19.0"},"trace":{"trace_id":"771a43a4192642f0b136d5159a501700","public_key":"49d0f7386ad645858ae85020e393bef3","release":"shop@2.3.1","environment":"production","sample_rate":"0.25","sampled":"true"}}`)
	e := &Envelope{Header: header, Items: []Item{
		{Type: "event", ContentType: "application/json", Payload: event},
		{Type: "attachment", ContentType: "application/octet-stream", Payload: attachment, Extra: map[string]any{"filename": "state.bin", "attachment_type": "event.attachment"}},
		{Type: "session", Payload: session},
		{Type: "client_report", Payload: report},
		{Type: "log", ContentType: "application/vnd.sentry.items.log+json", ItemCount: 4, Payload: logs},
	}}
	b := e.Marshal()
	if withLength {
		return b
	}
	// Drop "length" from the JSON items by rebuilding their headers.
	out := append([]byte(nil), header...)
	out = append(out, '\n')
	for _, it := range e.Items {
		if it.Type == "attachment" {
			one := &Envelope{Items: []Item{it}}
			m := one.Marshal()
			out = append(out, m[3:]...) // skip "{}\n"
			continue
		}
		h := map[string]any{"type": it.Type}
		if it.ContentType != "" {
			h["content_type"] = it.ContentType
		}
		if it.ItemCount != 0 {
			h["item_count"] = it.ItemCount
		}
		hb, _ := json.Marshal(h)
		out = append(out, hb...)
		out = append(out, '\n')
		out = append(out, it.Payload...)
		out = append(out, '\n')
	}
	return out
}

func TestBenchEnvelope(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		b := benchEnvelope(withLength)
		e, err := Parse(b)
		if err != nil {
			t.Fatalf("withLength=%v: %v", withLength, err)
		}
		if len(b) < 9000 || len(b) > 12000 || len(e.Items) != 5 || len(e.Items[0].Payload) < 5500 {
			t.Errorf("withLength=%v: %d bytes, %d items, event %d bytes", withLength, len(b), len(e.Items), len(e.Items[0].Payload))
		}
		t.Logf("withLength=%v: %d bytes, event %d bytes", withLength, len(b), len(e.Items[0].Payload))
		checkScanAgrees(t, b)
		checkRoundTrip(t, b)
	}
}

func benchScan(b *testing.B, withLength bool) {
	in := benchEnvelope(withLength)
	var s Summary
	if err := Scan(in, &s); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Scan(in, &s); err != nil {
			b.Fatal(err)
		}
	}
	if len(s.Items) != 5 {
		b.Fatalf("%d items", len(s.Items))
	}
}

func benchParse(b *testing.B, withLength bool) {
	in := benchEnvelope(withLength)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		e, err := Parse(in)
		if err != nil || len(e.Items) != 5 {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan(b *testing.B)          { benchScan(b, true) }
func BenchmarkScanNoLength(b *testing.B)  { benchScan(b, false) }
func BenchmarkParse(b *testing.B)         { benchParse(b, true) }
func BenchmarkParseNoLength(b *testing.B) { benchParse(b, false) }
func BenchmarkMarshal(b *testing.B)       { benchMarshal(b, false) }
func BenchmarkMarshalAppend(b *testing.B) { benchMarshal(b, true) }

func benchMarshal(b *testing.B, reuse bool) {
	e, err := Parse(benchEnvelope(true))
	if err != nil {
		b.Fatal(err)
	}
	out := e.Marshal()
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if reuse {
			out = e.AppendTo(out[:0])
		} else {
			out = e.Marshal()
		}
	}
}
