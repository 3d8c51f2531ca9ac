package compression

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// vocabulary for generated messages, paths and identifiers.
var vocab = strings.Fields(`
account action active address admin agent alert allocate apply archive assert async attach audit
backend balance batch billing bind block buffer build bundle cache callback cancel capture cart
channel charge check checkout child client close cluster commit compute config connect consumer
context copy count create cursor customer dashboard data database decode default delete deliver
deploy detach device digest dispatch document domain download driver email encode endpoint engine
entry error event export factory feature fetch field filter flush format frame gateway handler
header health history hook image import index insert instance invoice item job key label layout
limit listener load lock logger lookup manager mapper merge message metric middleware migrate model
module monitor mutex network node notify order owner packet page parse partition payload payment
permission pipeline plugin policy poll pool prefetch process producer profile project provider
proxy publish query queue quota reader record redirect refresh region register release render
replica report request resolve resource response retry route runner sample schedule schema scope
search secret segment select sender session settings shard signal snapshot socket source span
stream subscribe sync table task template tenant thread ticket timeout token trace transaction
transform upload user validate value vendor version view worker writer`)

// eventJSON returns a Sentry-error-event-like JSON document of roughly
// targetSize bytes, deterministic for seed. It mixes repeated structure
// (keys, SDK metadata, frame layout) with random identifiers, numbers and
// word sequences, so that it compresses about 4–8× like real events rather
// than the 30×+ of a synthetic repetitive body.
func eventJSON(seed uint64, targetSize int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5e47))
	hex := func(n int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, n)
		for i := range b {
			b[i] = digits[r.IntN(16)]
		}
		return string(b)
	}
	// Real events reuse a few modules and names throughout; draw from a
	// small per-event vocabulary so the body repeats itself like one.
	local := make([]string, 20)
	for i := range local {
		local[i] = vocab[r.IntN(len(vocab))]
	}
	word := func() string { return local[r.IntN(len(local))] }
	mods := make([]string, 4)
	for i := range mods {
		mods[i] = word() + "." + word() + "." + word()
	}
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = word()
		}
		return strings.Join(w, " ")
	}
	now := 1764500000.0 + float64(r.IntN(100000))
	ts := func() float64 { now += float64(r.IntN(5000)) / 1000; return now }
	ident := func() string { return word() + "_" + word() }
	type frame struct {
		Filename    string            `json:"filename"`
		AbsPath     string            `json:"abs_path"`
		Function    string            `json:"function"`
		Module      string            `json:"module"`
		Lineno      int               `json:"lineno"`
		InApp       bool              `json:"in_app"`
		PreContext  []string          `json:"pre_context"`
		ContextLine string            `json:"context_line"`
		PostContext []string          `json:"post_context"`
		Vars        map[string]string `json:"vars"`
	}
	codeLine := func() string {
		switch r.IntN(4) {
		case 0:
			return fmt.Sprintf("    %s = self.%s(%s, timeout=%d)", ident(), ident(), ident(), r.IntN(120))
		case 1:
			return fmt.Sprintf("    if %s is None or len(%s) > %d:", ident(), ident(), r.IntN(1000))
		case 2:
			return fmt.Sprintf("        raise %sError(%q)", title(word()), words(3))
		default:
			return fmt.Sprintf("    return %s.%s(%s)", word(), ident(), word())
		}
	}
	// A handful of source lines per event, as frames of the same files share
	// their context lines.
	lines := make([]string, 10)
	for i := range lines {
		lines[i] = codeLine()
	}
	codeLine = func() string { return lines[r.IntN(len(lines))] }
	ev := map[string]any{
		"event_id":    hex(32),
		"timestamp":   1764600000 + float64(r.IntN(1e6))/1000,
		"platform":    "python",
		"level":       []string{"error", "warning", "fatal"}[r.IntN(3)],
		"logger":      word() + "." + word(),
		"server_name": fmt.Sprintf("web-%s-%d", word(), r.IntN(64)),
		"release":     fmt.Sprintf("backend@%d.%d.%d+%s", r.IntN(30), r.IntN(20), r.IntN(100), hex(12)),
		"environment": "production",
		"sdk": map[string]any{"name": "sentry.python.django", "version": "2.19.2",
			"packages":     []map[string]string{{"name": "pypi:sentry-sdk", "version": "2.19.2"}},
			"integrations": []string{"django", "redis", "celery", "logging", "stdlib", "threading", "argv"}},
		"contexts": map[string]any{
			"os":      map[string]string{"name": "Linux", "version": "6.8.0-" + fmt.Sprint(r.IntN(90)) + "-generic"},
			"runtime": map[string]string{"name": "CPython", "version": "3.12." + fmt.Sprint(r.IntN(8))},
			"trace":   map[string]string{"trace_id": hex(32), "span_id": hex(16), "op": "http.server"},
		},
		"tags": map[string]string{"url": "/api/" + word() + "/" + fmt.Sprint(r.IntN(1e6)) + "/", "customer": hex(8), "region": word()},
		"user": map[string]any{"id": r.IntN(1e7), "ip_address": fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), r.IntN(256))},
		"request": map[string]any{"method": "POST", "url": "https://example.com/api/" + word() + "/" + hex(8),
			"headers": map[string]string{"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/" + fmt.Sprint(100+r.IntN(40)) + ".0", "Accept": "application/json", "X-Request-Id": hex(32)}},
	}
	var crumbs []map[string]any
	var frames []frame
	// Track the size by marshalling each added part once (the whole event
	// only at the end), keeping generation linear in targetSize.
	base, _ := json.Marshal(ev)
	size := len(base) + 60 // the breadcrumbs/exception wrappers
	added := func(v any) { b, _ := json.Marshal(v); size += len(b) + 1 }
	for size < targetSize {
		if r.IntN(3) == 0 {
			crumbs = append(crumbs, map[string]any{
				"timestamp": ts(), "category": word() + "." + word(),
				"level": "info", "message": words(3+r.IntN(4)) + " " + fmt.Sprint(r.IntN(1000)),
				"data": map[string]any{"duration_ms": r.IntN(5000), "status_code": []int{200, 201, 404, 500}[r.IntN(4)]},
			})
			ev["breadcrumbs"] = map[string]any{"values": crumbs}
			added(crumbs[len(crumbs)-1])
		} else {
			mod := mods[r.IntN(len(mods))]
			frames = append(frames, frame{
				Filename: strings.ReplaceAll(mod, ".", "/") + ".py", AbsPath: "/srv/app/" + strings.ReplaceAll(mod, ".", "/") + ".py",
				Function: ident(), Module: mod, Lineno: 1 + r.IntN(2000), InApp: r.IntN(2) == 0,
				PreContext: []string{codeLine(), codeLine()}, ContextLine: codeLine(), PostContext: []string{codeLine()},
				Vars: map[string]string{ident(): fmt.Sprint(r.IntN(100)), "self": "<" + title(word()) + " object at 0x7f3c" + hex(6) + ">"},
			})
			ev["exception"] = map[string]any{"values": []map[string]any{{
				"type": title(word()) + "Error", "value": words(6), "module": "app." + word(),
				"mechanism":  map[string]any{"type": "django", "handled": false},
				"stacktrace": map[string]any{"frames": frames},
			}}}
			added(frames[len(frames)-1])
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

// title upper-cases the first letter of an ASCII word.
func title(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}
