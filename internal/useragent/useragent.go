// Package useragent generates realistic, deterministic User-Agent strings,
// reads lists of real ones (ParseList: one per line, optionally weighted)
// and classifies any agent into the kind of client that sent it
// (Classify), which is what a pool needs to build payloads that fit it.
//
// Families and their weights (per mille, in families) follow real browser traffic:
// Chrome desktop and Android, Mobile Safari, Safari on macOS, Chrome and
// Firefox on iOS, Edge, Firefox, Samsung Internet, Opera, crawlers, legacy
// browsers (old IE, EdgeHTML, old Chrome/Firefox/Safari, which Relay's
// legacy-browser filter may drop), native app clients (CFNetwork, Dalvik,
// okhttp) and tools (python-requests, Go-http-client, curl, node).
//
// Generate draws everything from the caller's *rand.Rand, so the same stream
// gives the same agent. With unique set, the string also encodes a number v
// injectively in a field real agents vary (full Chrome build numbers, iOS
// build codes, Gecko build dates, Android build ids, app build numbers), so
// agents generated for distinct v never collide — blast uses this to give
// every envelope of a pool an agent no other envelope has.
package useragent

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// Class is what kind of client sent the agent; pool picks an SDK platform
// that fits it (a javascript event needs a browser agent).
type Class uint8

const (
	Browser    Class = iota // desktop or mobile browser
	Bot                     // crawler
	IOSApp                  // native iOS app (CFNetwork)
	AndroidApp              // native Android app (Dalvik, okhttp)
	Tool                    // scripts and server-side HTTP clients
)

func (c Class) String() string {
	switch c {
	case Browser:
		return "browser"
	case Bot:
		return "bot"
	case IOSApp:
		return "ios-app"
	case AndroidApp:
		return "android-app"
	}
	return "tool"
}

// Agent is one generated agent.
type Agent struct {
	UA     string
	Family string // generator family, e.g. "chrome-desktop"
	Class  Class
	Mobile bool
}

type family struct {
	name   string
	weight int
	class  Class
	mobile bool
	gen    func(r *rand.Rand, unique bool, v uint64) string
}

// families in fixed order; weights are per mille.
var families = []family{
	{"chrome-desktop", 360, Browser, false, chromeDesktop},
	{"chrome-android", 160, Browser, true, chromeAndroid},
	{"mobile-safari", 160, Browser, true, mobileSafari},
	{"safari-mac", 40, Browser, false, safariMac},
	{"ios-other-browser", 20, Browser, true, iosOtherBrowser},
	{"edge", 50, Browser, false, edge},
	{"firefox", 35, Browser, false, firefox},
	{"samsung", 30, Browser, true, samsung},
	{"opera", 20, Browser, false, opera},
	{"bot", 20, Bot, false, bot},
	{"legacy", 15, Browser, false, legacy},
	{"ios-app", 30, IOSApp, true, iosApp},
	{"android-app", 30, AndroidApp, true, androidApp},
	{"tool", 30, Tool, false, tool},
}

var totalWeight = func() int {
	t := 0
	for _, f := range families {
		t += f.weight
	}
	return t
}()

// Families lists the family names in fixed order.
func Families() []string {
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = f.name
	}
	return out
}

// Generate draws one agent from r. With unique set, the UA string encodes v
// (see the package doc).
func Generate(r *rand.Rand, unique bool, v uint64) Agent {
	x := r.IntN(totalWeight)
	f := families[len(families)-1]
	for _, ff := range families {
		if x < ff.weight {
			f = ff
			break
		}
		x -= ff.weight
	}
	return Agent{UA: f.gen(r, unique, v), Family: f.name, Class: f.class, Mobile: f.mobile}
}

func itoa(n int) string                    { return strconv.Itoa(n) }
func utoa(n uint64) string                 { return strconv.FormatUint(n, 10) }
func pick(r *rand.Rand, l []string) string { return l[r.IntN(len(l))] }
func between(r *rand.Rand, lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// chromeVersion is "M.0.0.0" (reduced UA), or a full "M.0.B.P" version.
// Unique versions encode v in build and patch; the build base grows with the
// major like Chrome's real build numbers (M120 ≈ 6099).
func chromeVersion(r *rand.Rand, m int, unique bool, v uint64, full bool) string {
	base := 6099 + (m-120)*70
	if m < 120 {
		base = 2623 + (m-50)*50
	}
	if unique {
		return itoa(m) + ".0." + utoa(uint64(base)+v/200) + "." + utoa(v%200)
	}
	if full {
		return itoa(m) + ".0." + itoa(base+r.IntN(60)) + "." + itoa(r.IntN(200))
	}
	return itoa(m) + ".0.0.0"
}

var desktopOS = []string{
	"Windows NT 10.0; Win64; x64", "Windows NT 10.0; Win64; x64", "Windows NT 10.0; Win64; x64",
	"Macintosh; Intel Mac OS X 10_15_7", "Macintosh; Intel Mac OS X 10_15_7", "X11; Linux x86_64", "X11; CrOS x86_64 14541.0.0",
}

func chromeMajor(r *rand.Rand) int { return between(r, 128, 146) }

func chromeDesktop(r *rand.Rand, unique bool, v uint64) string {
	return "Mozilla/5.0 (" + pick(r, desktopOS) + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
		chromeVersion(r, chromeMajor(r), unique, v, false) + " Safari/537.36"
}

var androidModels = []string{"SM-S921B", "SM-A546B", "SM-G991B", "SM-A155F", "Pixel 8", "Pixel 7a", "Pixel 9 Pro", "moto g54 5G", "M2101K6G", "CPH2451", "2201117TG", "RMX3771", "V2231"}

// androidDevice is the reduced "Android 10; K" or a full device token.
func androidDevice(r *rand.Rand) string {
	if r.IntN(100) < 70 {
		return "Linux; Android 10; K"
	}
	return "Linux; Android " + itoa(between(r, 12, 16)) + "; " + pick(r, androidModels)
}

func chromeAndroid(r *rand.Rand, unique bool, v uint64) string {
	return "Mozilla/5.0 (" + androidDevice(r) + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
		chromeVersion(r, chromeMajor(r), unique, v, false) + " Mobile Safari/537.36"
}

// iosVersion returns (token "17_4_1", dotted "17.4.1").
func iosVersion(r *rand.Rand) (string, string) {
	major := pick(r, []string{"16", "17", "17", "18", "18", "18", "26"})
	minor := itoa(r.IntN(7))
	tok, dot := major+"_"+minor, major+"."+minor
	if r.IntN(2) == 0 {
		p := itoa(1 + r.IntN(3))
		tok, dot = tok+"_"+p, dot+"."+p
	}
	return tok, dot
}

// mobileBuild is the "Mobile/…" token: the frozen 15E148, or for unique
// agents an iOS-style build code that encodes v ("21E" + number).
func mobileBuild(unique bool, v uint64) string {
	if !unique {
		return "15E148"
	}
	return utoa(20+v%6) + string(rune('A'+(v/6)%26)) + utoa(v/156+1)
}

func iosDevice(r *rand.Rand, tok string) string {
	if r.IntN(100) < 85 {
		return "iPhone; CPU iPhone OS " + tok + " like Mac OS X"
	}
	return "iPad; CPU OS " + tok + " like Mac OS X"
}

func mobileSafari(r *rand.Rand, unique bool, v uint64) string {
	tok, dot := iosVersion(r)
	return "Mozilla/5.0 (" + iosDevice(r, tok) + ") AppleWebKit/605.1.15 (KHTML, like Gecko) Version/" + dot +
		" Mobile/" + mobileBuild(unique, v) + " Safari/604.1"
}

func safariMac(r *rand.Rand, unique bool, v uint64) string {
	if unique {
		// Real macOS Safari strings carry nothing that varies enough; an
		// iPad in desktop mode sends the same shape plus a build token.
		return mobileSafari(r, unique, v)
	}
	ver := pick(r, []string{"17.4.1", "17.5", "17.6", "18.0", "18.1.1", "18.2", "18.3", "18.4", "18.5", "18.6", "26.0", "26.1"})
	return "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/" + ver + " Safari/605.1.15"
}

func iosOtherBrowser(r *rand.Rand, unique bool, v uint64) string {
	tok, _ := iosVersion(r)
	dev := iosDevice(r, tok)
	if r.IntN(3) > 0 {
		m := chromeMajor(r)
		return "Mozilla/5.0 (" + dev + ") AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/" + chromeVersion(r, m, unique, v, true) +
			" Mobile/15E148 Safari/604.1"
	}
	return "Mozilla/5.0 (" + dev + ") AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/" + itoa(between(r, 128, 146)) + ".0 Mobile/" +
		mobileBuild(unique, v) + " Safari/605.1.15"
}

func edge(r *rand.Rand, unique bool, v uint64) string {
	m := chromeMajor(r)
	os := pick(r, []string{"Windows NT 10.0; Win64; x64", "Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10_15_7"})
	return "Mozilla/5.0 (" + os + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + chromeVersion(r, m, unique, v, false) +
		" Safari/537.36 Edg/" + itoa(m) + ".0." + itoa(2400+(m-128)*50+r.IntN(50)) + "." + itoa(r.IntN(120))
}

// geckoDate is Firefox's frozen "20100101", or for unique agents a build
// date v days after it (as pre-2013 Firefox builds sent).
func geckoDate(unique bool, v uint64) string {
	if !unique {
		return "20100101"
	}
	return time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(v)).Format("20060102")
}

func firefox(r *rand.Rand, unique bool, v uint64) string {
	f := itoa(between(r, 128, 146))
	if !unique && r.IntN(10) == 0 {
		return "Mozilla/5.0 (Android " + itoa(between(r, 12, 16)) + "; Mobile; rv:" + f + ".0) Gecko/" + f + ".0 Firefox/" + f + ".0"
	}
	os := pick(r, []string{"Windows NT 10.0; Win64; x64", "Windows NT 10.0; Win64; x64", "Macintosh; Intel Mac OS X 10.15", "X11; Linux x86_64", "X11; Ubuntu; Linux x86_64"})
	return "Mozilla/5.0 (" + os + "; rv:" + f + ".0) Gecko/" + geckoDate(unique, v) + " Firefox/" + f + ".0"
}

func samsung(r *rand.Rand, unique bool, v uint64) string {
	dev := "Linux; Android " + itoa(between(r, 12, 15)) + "; " + pick(r, androidModels[:4])
	if r.IntN(2) == 0 {
		dev = "Linux; Android 10; K"
	}
	return "Mozilla/5.0 (" + dev + ") AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/" + itoa(between(r, 24, 28)) +
		".0 Chrome/" + chromeVersion(r, between(r, 124, 138), unique, v, false) + " Mobile Safari/537.36"
}

func opera(r *rand.Rand, unique bool, v uint64) string {
	return "Mozilla/5.0 (" + pick(r, desktopOS[:5]) + ") AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
		chromeVersion(r, chromeMajor(r), unique, v, false) + " Safari/537.36 OPR/" + itoa(between(r, 112, 126)) + ".0.0.0"
}

var bots = []string{
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
	"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
	"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
	"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
	"Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
	"Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)",
	"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
}

func bot(r *rand.Rand, unique bool, v uint64) string {
	if unique || r.IntN(4) == 0 {
		// Googlebot's evergreen smartphone crawler carries a full Chrome version.
		return "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
			chromeVersion(r, chromeMajor(r), unique, v, true) + " Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	}
	return pick(r, bots)
}

var legacyFixed = []string{
	"Mozilla/5.0 (compatible; MSIE 9.0; Windows NT 6.1; Trident/5.0)",
	"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.2; Trident/6.0)",
	"Mozilla/5.0 (Windows NT 6.3; Trident/7.0; rv:11.0) like Gecko",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.102 Safari/537.36 Edge/18.17763",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_6_8) AppleWebKit/534.59.10 (KHTML, like Gecko) Version/5.1.9 Safari/534.59.10",
	"Opera/9.80 (Windows NT 6.1; U; en) Presto/2.10.229 Version/11.62",
}

func legacy(r *rand.Rand, unique bool, v uint64) string {
	switch x := r.IntN(10); {
	case unique || x < 4:
		// Old Chrome still sent full versions.
		return "Mozilla/5.0 (Windows NT 6.1; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
			chromeVersion(r, between(r, 50, 80), unique, v, true) + " Safari/537.36"
	case x < 6:
		f := itoa(between(r, 48, 60))
		return "Mozilla/5.0 (Windows NT 6.1; WOW64; rv:" + f + ".0) Gecko/20100101 Firefox/" + f + ".0"
	}
	return pick(r, legacyFixed)
}

var appNames = []string{"ShopApp", "Shop", "Checkout", "Acme", "FoodNow", "RideShare", "Wallet", "Notes", "Photos+", "Tracker"}

func iosApp(r *rand.Rand, unique bool, v uint64) string {
	darwin := pick(r, []string{"CFNetwork/1494.0.7 Darwin/23.4.0", "CFNetwork/1568.100.1 Darwin/24.0.0", "CFNetwork/3826.500.131 Darwin/24.5.0", "CFNetwork/1410.0.3 Darwin/22.6.0"})
	build := itoa(between(r, 100, 999))
	if unique {
		build = utoa(v + 1)
	}
	return pick(r, appNames) + "/" + build + " " + darwin
}

func androidApp(r *rand.Rand, unique bool, v uint64) string {
	if !unique && r.IntN(3) == 0 {
		return "okhttp/" + pick(r, []string{"4.12.0", "4.11.0", "4.9.3", "5.0.0-alpha.14", "3.14.9"})
	}
	a := between(r, 11, 16)
	codes := []string{"UP1A", "TP1A", "SP1A", "AP2A", "BP1A", "UKQ1", "TKQ1"}
	date := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(1400))
	n := itoa(r.IntN(1000))
	if unique {
		date = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(v/1000))
		n = utoa(v % 1000)
	}
	for len(n) < 3 {
		n = "0" + n
	}
	return "Dalvik/2.1.0 (Linux; U; Android " + itoa(a) + "; " + pick(r, androidModels) + " Build/" + pick(r, codes) + "." +
		date.Format("060102") + "." + n + ")"
}

var tools = []string{
	"python-requests/2.32.3", "python-requests/2.31.0", "python-httpx/0.27.2", "Go-http-client/1.1", "Go-http-client/2.0",
	"curl/8.5.0", "curl/7.88.1", "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "axios/1.7.9", "Java/17.0.12",
	"Apache-HttpClient/4.5.14 (Java/17.0.12)", "okhttp/4.12.0", "PostmanRuntime/7.43.0", "Wget/1.21.4",
}

func tool(r *rand.Rand, unique bool, v uint64) string {
	if unique {
		// A scripted client with its own build number.
		return pick(r, []string{"inventory-sync", "order-importer", "billing-cron", "feed-builder"}) + "/1." + utoa(v) + " " + pick(r, tools[:6])
	}
	return pick(r, tools)
}
