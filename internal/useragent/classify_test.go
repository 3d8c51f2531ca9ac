package useragent

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Real agents, as browsers, crawlers, apps and tools send them.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ua     string
		family string
		class  Class
		mobile bool
	}{
		// Browsers.
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "chrome-desktop", Browser, false},
		{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36", "chrome-desktop", Browser, false},
		{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "chrome-android", Browser, true},
		{"Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "chrome-android", Browser, true},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", "mobile-safari", Browser, true},
		{"Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "mobile-safari", Browser, true},
		// A WKWebView inside an app, and Instagram's in-app browser: JavaScript runs there.
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", "mobile-safari", Browser, true},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 338.0.3.23.93 (iPhone14,5; iOS 17_5_1; en_US; en; scale=3.00; 1170x2532; 619461904)", "mobile-safari", Browser, true},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "safari-mac", Browser, false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", "ios-other-browser", Browser, true},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/132.0 Mobile/15E148 Safari/605.1.15", "ios-other-browser", Browser, true},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 EdgiOS/131.2903.68 Mobile/15E148 Safari/605.1.15", "ios-other-browser", Browser, true},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "edge", Browser, false},
		{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0", "edge", Browser, true},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "firefox", Browser, false},
		{"Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0", "firefox", Browser, true},
		{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/27.0 Chrome/125.0.0.0 Mobile Safari/537.36", "samsung", Browser, true},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36 OPR/115.0.0.0", "opera", Browser, false},
		{"Opera/9.80 (Windows NT 6.1; U; en) Presto/2.10.229 Version/11.62", "legacy", Browser, false},
		{"Mozilla/5.0 (Windows NT 6.3; Trident/7.0; rv:11.0) like Gecko", "legacy", Browser, false},
		{"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.2; Trident/6.0)", "legacy", Browser, false},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.102 Safari/537.36 Edge/18.17763", "legacy", Browser, false},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Slack/4.41.105 Chrome/130.0.6723.137 Electron/33.2.0 Safari/537.36 Sonic Slack_SSB/4.41.105", "chrome-desktop", Browser, false},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36", "chrome-desktop", Browser, false},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15 Epiphany/605.1.15", "other-browser", Browser, false},
		// A phone whose model contains "bot" but is no crawler.
		{"Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36", "chrome-android", Browser, true},

		// Crawlers and link expanders.
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "bot", Bot, false},
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "bot", Bot, false},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", "bot", Bot, false},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", "bot", Bot, false},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)", "bot", Bot, false},
		{"Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)", "bot", Bot, false},
		{"Mozilla/5.0 (compatible; Yahoo! Slurp; http://help.yahoo.com/help/us/ysearch/slurp)", "bot", Bot, false},
		{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "bot", Bot, false},
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "bot", Bot, false},
		{"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "bot", Bot, false},
		{"Mediapartners-Google", "bot", Bot, false},
		{"Screaming Frog SEO Spider/20.4", "bot", Bot, false},
		{"Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)", "bot", Bot, false},

		// Native iOS clients.
		{"ShopApp/123 CFNetwork/1494.0.7 Darwin/23.4.0", "ios-app", IOSApp, true},
		{"Acme%20Notes/5821 CFNetwork/1568.100.1 Darwin/24.0.0", "ios-app", IOSApp, true},
		{"Wallet/2.3 (com.example.wallet; build:118; iOS 17.5.1) Alamofire/5.9.1", "ios-app", IOSApp, true},
		{"Instagram 338.0.3.23.93 (iPhone14,5; iOS 17_5_1; en_US; en; scale=3.00; 1170x2532; 619461904)", "ios-app", IOSApp, true},
		{"Tracker/1.0 (iPad; iPadOS 18.1; Scale/2.00)", "ios-app", IOSApp, true},
		{"Notes/2 CFNetwork/1494.0.7 Darwin/23.4.0 (Macintosh; macOS 14.4)", "ios-app", IOSApp, false},

		// Native Android clients.
		{"Dalvik/2.1.0 (Linux; U; Android 14; Pixel 8 Build/UP1A.231005.007)", "android-app", AndroidApp, true},
		{"okhttp/4.12.0", "android-app", AndroidApp, true},
		{"FoodNow/4.2.0 (Android 13; SM-A546B)", "android-app", AndroidApp, true},

		// Tools and servers.
		{"python-requests/2.32.3", "tool", Tool, false},
		{"Go-http-client/2.0", "tool", Tool, false},
		{"curl/8.5.0", "tool", Tool, false},
		{"node-fetch/1.0 (+https://github.com/bitinn/node-fetch)", "tool", Tool, false},
		{"axios/1.7.9", "tool", Tool, false},
		{"Apache-HttpClient/4.5.14 (Java/17.0.12)", "tool", Tool, false},
		{"PostmanRuntime/7.43.0", "tool", Tool, false},
		{"Wget/1.21.4", "tool", Tool, false},
		{"Studios Sync/2.1 Go-http-client/1.1", "tool", Tool, false},
		{"", "tool", Tool, false},
	} {
		got := Classify(tc.ua)
		want := Agent{UA: tc.ua, Family: tc.family, Class: tc.class, Mobile: tc.mobile}
		if got != want {
			t.Errorf("%q:\n got %s %s mobile=%v\nwant %s %s mobile=%v", tc.ua, got.Family, got.Class, got.Mobile, want.Family, want.Class, want.Mobile)
		}
	}
}

// Every generated agent classifies into its own class, and into its own
// family where the family is told by tokens (legacy agents are old
// versions of modern browsers; unique Safari on macOS is an iPad's).
func TestClassifyGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 50_000; i++ {
		unique := i%4 == 0
		a := Generate(r, unique, uint64(i))
		got := Classify(a.UA)
		if a.Family == "tool" && strings.HasPrefix(a.UA, "okhttp/") {
			continue // as often an Android app's, which is what Classify says
		}
		if got.Class != a.Class {
			t.Fatalf("%q (%s): class %s, want %s", a.UA, a.Family, got.Class, a.Class)
		}
		if a.Family != "legacy" && !(unique && a.Family == "safari-mac") && got.Family != a.Family {
			t.Fatalf("%q: family %s, want %s", a.UA, got.Family, a.Family)
		}
	}
}

// FuzzClassify: any string classifies without panicking, the same way
// twice, keeping the string, into a known class and a family.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"", "bot", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)", "okhttp/4.12.0",
		"Dalvik/2.1.0 (Linux; U; Android 14)", "x CFNetwork/1 Darwin/2", "ios", "spider", "Cubot", "MOZILLA/ BOT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ua string) {
		a := Classify(ua)
		if a != Classify(ua) || a.UA != ua || a.Class > Tool || a.Family == "" {
			t.Fatalf("%q: %+v", ua, a)
		}
		if a.Class != Browser && a.Class != IOSApp && a.Class != AndroidApp && a.Mobile {
			t.Fatalf("%q: a %s cannot be mobile", ua, a.Class)
		}
	})
}
