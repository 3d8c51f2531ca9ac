package useragent

import "strings"

// Classify says what kind of client sent ua, so that a pool drawing agents
// from a list rather than from Generate still builds payloads that fit
// them. It looks for tokens, not versions, in this order: crawlers (as
// Relay's web-crawler filter names them: Googlebot, bingbot, generic
// "bot/" or "spider;", ...), native iOS clients (CFNetwork, Darwin, or
// iPhone/iPad/iOS outside a Mozilla string), native Android clients
// (Dalvik, okhttp, or Android outside a Mozilla string), browsers (any
// Mozilla/ or Opera/ string, web views included: they run JavaScript),
// and everything else as a tool. Family uses Generate's family names
// where one fits, "other-browser" for other browsers.
func Classify(ua string) Agent {
	l := strings.ToLower(ua)
	a := Agent{UA: ua}
	browserLike := strings.HasPrefix(l, "mozilla/") || strings.HasPrefix(l, "opera/")
	switch {
	case crawler(l):
		a.Family, a.Class = "bot", Bot
	case strings.Contains(l, "cfnetwork/") || strings.Contains(l, "darwin/") || strings.Contains(l, "alamofire/") ||
		!browserLike && (hasWord(l, "iphone") || hasWord(l, "ipad") || hasWord(l, "ios") || hasWord(l, "ipados") ||
			hasWord(l, "watchos") || hasWord(l, "tvos")):
		a.Family, a.Class = "ios-app", IOSApp
		a.Mobile = !strings.Contains(l, "macintosh") && !strings.Contains(l, "mac os x") && !hasWord(l, "macos")
	case strings.HasPrefix(l, "dalvik/") || strings.HasPrefix(l, "okhttp/") || !browserLike && hasWord(l, "android"):
		a.Family, a.Class, a.Mobile = "android-app", AndroidApp, true
	case browserLike:
		a.Family, a.Class = browserFamily(l), Browser
		a.Mobile = strings.Contains(l, "mobile") || hasWord(l, "android") || hasWord(l, "iphone") || hasWord(l, "ipad") ||
			hasWord(l, "ipod")
	default:
		a.Family, a.Class = "tool", Tool
	}
	return a
}

// browserFamily names the browser of a lower-cased Mozilla string; the
// engines' own tokens come before the Chrome and Safari ones every
// Chromium and WebKit browser also sends.
func browserFamily(l string) string {
	ios := hasWord(l, "iphone") || hasWord(l, "ipad") || hasWord(l, "ipod")
	switch {
	case strings.Contains(l, "msie ") || strings.Contains(l, "trident/") || strings.Contains(l, " edge/") ||
		strings.Contains(l, "presto/"):
		return "legacy"
	case ios && (strings.Contains(l, "crios/") || strings.Contains(l, "fxios/") || strings.Contains(l, "edgios/") ||
		strings.Contains(l, "opt/")):
		return "ios-other-browser"
	case strings.Contains(l, "samsungbrowser/"):
		return "samsung"
	case strings.Contains(l, "opr/") || strings.Contains(l, "opera"):
		return "opera"
	case strings.Contains(l, "edg/") || strings.Contains(l, "edga/"):
		return "edge"
	case strings.Contains(l, "firefox/"):
		return "firefox"
	case strings.Contains(l, "chrome/"):
		if hasWord(l, "android") {
			return "chrome-android"
		}
		return "chrome-desktop"
	case ios:
		return "mobile-safari"
	case strings.Contains(l, "macintosh") && strings.Contains(l, "safari/"):
		return "safari-mac"
	}
	return "other-browser"
}

// crawlerNames are crawlers and link expanders that the generic "bot/"
// rule misses, after Relay's web-crawler filter.
var crawlerNames = []string{
	"mediapartners-google", "adsbot-google", "feedfetcher-google", "storebot-google", "google-inspectiontool",
	"google-read-aloud", "google-site-verification", "google-pagerenderer", "google-extended", "googleother",
	"bingpreview", "slurp", "sogou", "facebookexternalhit", "facebookcatalog", "meta-externalagent", "ia_archiver",
	"slackbot", "slack-imgproxy", "calypso appinsights", "amazonproductdiscovery", "chatgpt-user", "crawler",
}

// crawler reports whether the lower-cased l names a crawler: a known name,
// or "bot", "bots" or "spider" followed by '/', ';', ')', '-', a space or
// the end, as Relay's filter matches them ("CUBOT_X30" is no crawler).
func crawler(l string) bool {
	for _, n := range crawlerNames {
		if strings.Contains(l, n) {
			return true
		}
	}
	for _, w := range []string{"bot", "bots", "spider"} {
		for i := 0; i < len(l); {
			j := strings.Index(l[i:], w)
			if j < 0 {
				break
			}
			end := i + j + len(w)
			if end == len(l) || strings.IndexByte("/;)- ", l[end]) >= 0 {
				return true
			}
			i = end
		}
	}
	return false
}

// hasWord reports whether w occurs in l with no letter right before or
// after it ("ios" in "(iPhone; iOS 17_4)" but not in "studios").
func hasWord(l, w string) bool {
	for i := 0; i < len(l); {
		j := strings.Index(l[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if (start == 0 || !letter(l[start-1])) && (end == len(l) || !letter(l[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
