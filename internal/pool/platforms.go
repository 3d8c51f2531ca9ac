package pool

import (
	"github.com/relayload/relayload/internal/useragent"
)

// platform is one SDK's style: how it names frames, what it sends.
type platform struct {
	name         string // event "platform"
	sdk          string
	sdkVersion   string
	integrations []string
	pkg          string   // sdk.packages name
	lang         language // frame, code-line, vars and SQL placeholder style
	browser      bool     // runs in the browser: needs a browser agent
	mobile       bool     // native app
	server       bool     // server-side: has server_name, runtime
	vars         int      // percent of in-app frames with vars
	ctxLines     int      // percent of in-app frames with context lines
	libs         []libFrame
	excs         []excType
	mechanisms   []string
	runtime      [2]string
	logger       string
}

// language is the language a platform's code is written in: it decides how
// frames are named, what source and context lines look like, the repr of
// local variables and the SQL placeholder style.
type language uint8

const (
	langPython     language = iota + 1 // Django: .py files, modules, vars with self
	langJavaScript                     // browser (React) and Node: colno, $1 placeholders
	langJava                           // Spring: classes as modules, ? placeholders
	langGo                             // net/http, gin: $1 placeholders
	langSwift                          // iOS: instruction addresses, no lines or context
)

type libFrame struct{ module, function, file string }

type excType struct {
	typ, module string
	value       func(g *gen) string
}

func (g *gen) q(s string) string { return "'" + s + "'" }

var platforms = []*platform{
	{
		name: "javascript", sdk: "sentry.javascript.react", sdkVersion: "9.15.0", pkg: "npm:@sentry/react", lang: langJavaScript, browser: true,
		integrations: []string{"InboundFilters", "FunctionToString", "BrowserApiErrors", "Breadcrumbs", "GlobalHandlers", "LinkedErrors", "Dedupe", "HttpContext", "BrowserSession", "BrowserTracing"},
		ctxLines:     30,
		libs: []libFrame{
			{"react-dom", "commitRootImpl", "node_modules/react-dom/cjs/react-dom.production.min.js"},
			{"react-dom", "performSyncWorkOnRoot", "node_modules/react-dom/cjs/react-dom.production.min.js"},
			{"react-dom", "flushSyncCallbacks", "node_modules/react-dom/cjs/react-dom.production.min.js"},
			{"react-dom", "dispatchDiscreteEvent", "node_modules/react-dom/cjs/react-dom.production.min.js"},
			{"react-dom", "invokeGuardedCallbackImpl", "node_modules/react-dom/cjs/react-dom.development.js"},
			{"react", "renderWithHooks", "node_modules/react-dom/cjs/react-dom.production.min.js"},
			{"react-router", "RenderedRoute", "node_modules/react-router/dist/index.js"},
			{"@tanstack/query-core", "Query.fetch", "node_modules/@tanstack/query-core/build/modern/query.js"},
			{"axios", "Axios.request", "node_modules/axios/lib/core/Axios.js"},
			{"axios", "settle", "node_modules/axios/lib/core/settle.js"},
			{"axios", "XMLHttpRequest.onloadend", "node_modules/axios/lib/adapters/xhr.js"},
			{"redux", "dispatch", "node_modules/redux/dist/redux.mjs"},
			{"@reduxjs/toolkit", "createAsyncThunk", "node_modules/@reduxjs/toolkit/dist/redux-toolkit.modern.mjs"},
			{"zone.js", "ZoneDelegate.invokeTask", "node_modules/zone.js/fesm2015/zone.js"},
			{"", "Promise.then", "<anonymous>"},
			{"", "HTMLButtonElement.sentryWrapped", "node_modules/@sentry/browser/build/npm/esm/helpers.js"},
		},
		excs: []excType{
			{"TypeError", "", func(g *gen) string {
				return g.s("Cannot read properties of undefined (reading ", g.q(g.noun()+title(g.noun())), ")")
			}},
			{"TypeError", "", func(g *gen) string { return g.s(g.noun(), ".", g.camel(), " is not a function") }},
			{"ReferenceError", "", func(g *gen) string { return g.s(g.camel(), " is not defined") }},
			{"Error", "", func(g *gen) string { return g.s("Request failed with status code ", g.itoa(400+g.r.IntN(105))) }},
			{"ChunkLoadError", "", func(g *gen) string {
				return g.s("Loading chunk ", g.itoa(g.r.IntN(900)), " failed. (error: https://", g.pickS(hosts), "/static/js/", g.itoa(g.r.IntN(900)), ".", g.hexID(8), ".chunk.js)")
			}},
			{"RangeError", "", func(g *gen) string { return "Maximum call stack size exceeded" }},
			{"SyntaxError", "", func(g *gen) string { return "Unexpected token '<', \"<!DOCTYPE \"... is not valid JSON" }},
			{"AxiosError", "", func(g *gen) string { return g.s("timeout of ", g.itoa(1000*(1+g.r.IntN(30))), "ms exceeded") }},
		},
		mechanisms: []string{"onerror", "onunhandledrejection", "instrument", "generic", "auto.browser.browserapierrors.addEventListener"},
	},
	{
		name: "node", sdk: "sentry.javascript.node", sdkVersion: "9.15.0", pkg: "npm:@sentry/node", lang: langJavaScript, server: true,
		integrations: []string{"InboundFilters", "FunctionToString", "LinkedErrors", "RequestData", "Console", "Http", "NodeFetch", "OnUncaughtException", "OnUnhandledRejection", "ContextLines", "LocalVariables", "Modules", "Express", "Postgres"},
		ctxLines:     50, vars: 20, runtime: [2]string{"node", "v22.11.0"},
		libs: []libFrame{
			{"express.lib.router:layer", "Layer.handle [as handle_request]", "/app/node_modules/express/lib/router/layer.js"},
			{"express.lib.router:index", "next", "/app/node_modules/express/lib/router/index.js"},
			{"express.lib.router:route", "Route.dispatch", "/app/node_modules/express/lib/router/route.js"},
			{"express.lib.router:index", "Function.process_params", "/app/node_modules/express/lib/router/index.js"},
			{"node:internal/process:task_queues", "process.processTicksAndRejections", "node:internal/process/task_queues"},
			{"node:internal/timers", "listOnTimeout", "node:internal/timers"},
			{"pg.lib:client", "Client._handleErrorMessage", "/app/node_modules/pg/lib/client.js"},
			{"pg-protocol.dist:parser", "Parser.parse", "/app/node_modules/pg-protocol/dist/parser.js"},
			{"node:events", "EventEmitter.emit", "node:events"},
			{"node:net", "Socket.emit", "node:net"},
			{"ioredis.built:Redis", "Redis.sendCommand", "/app/node_modules/ioredis/built/Redis.js"},
			{"@prisma.client.runtime:library", "ClientEngine.request", "/app/node_modules/@prisma/client/runtime/library.js"},
			{"body-parser.lib.types:json", "jsonParser", "/app/node_modules/body-parser/lib/types/json.js"},
		},
		excs: []excType{
			{"TypeError", "", func(g *gen) string { return g.s("Cannot read properties of null (reading ", g.q(g.noun()+"Id"), ")") }},
			{"Error", "", func(g *gen) string { return g.s("connect ECONNREFUSED ", g.pickS(dbHosts), ":5432") }},
			{"Error", "", func(g *gen) string { return g.s("relation \"", g.noun(), "s\" does not exist") }},
			{"PrismaClientKnownRequestError", "", func(g *gen) string {
				return g.s("Unique constraint failed on the fields: (`", g.noun(), "_id`)")
			}},
			{"AbortError", "", func(g *gen) string { return "The operation was aborted due to timeout" }},
			{"Error", "", func(g *gen) string { return g.s("ETIMEDOUT while calling ", g.pickS(apiHosts)) }},
		},
		mechanisms: []string{"onuncaughtexception", "onunhandledrejection", "auto.middleware.express", "generic"},
		logger:     "console",
	},
	{
		name: "python", sdk: "sentry.python.django", sdkVersion: "2.19.0", pkg: "pypi:sentry-sdk", lang: langPython, server: true,
		integrations: []string{"argv", "atexit", "dedupe", "django", "excepthook", "logging", "modules", "redis", "stdlib", "threading", "celery", "httpx"},
		ctxLines:     60, vars: 50, runtime: [2]string{"CPython", "3.12.7"},
		libs: []libFrame{
			{"django.core.handlers.exception", "inner", "django/core/handlers/exception.py"},
			{"django.core.handlers.base", "_get_response", "django/core/handlers/base.py"},
			{"django.views.decorators.csrf", "_view_wrapper", "django/views/decorators/csrf.py"},
			{"django.views.generic.base", "view", "django/views/generic/base.py"},
			{"rest_framework.views", "dispatch", "rest_framework/views.py"},
			{"rest_framework.views", "handle_exception", "rest_framework/views.py"},
			{"rest_framework.mixins", "create", "rest_framework/mixins.py"},
			{"rest_framework.serializers", "is_valid", "rest_framework/serializers.py"},
			{"django.db.models.query", "__iter__", "django/db/models/query.py"},
			{"django.db.models.sql.compiler", "execute_sql", "django/db/models/sql/compiler.py"},
			{"django.db.backends.utils", "_execute", "django/db/backends/utils.py"},
			{"django.db.backends.utils", "execute", "django/db/backends/utils.py"},
			{"django.db.utils", "__exit__", "django/db/utils.py"},
			{"sentry_sdk.integrations.django.views", "sentry_wrapped_callback", "sentry_sdk/integrations/django/views.py"},
			{"celery.app.trace", "trace_task", "celery/app/trace.py"},
			{"httpx._client", "send", "httpx/_client.py"},
			{"httpx._transports.default", "handle_request", "httpx/_transports/default.py"},
			{"redis.client", "execute_command", "redis/client.py"},
		},
		excs: []excType{
			{"KeyError", "builtins", func(g *gen) string { return g.q(g.noun() + "_id") }},
			{"ValueError", "builtins", func(g *gen) string { return g.s("invalid literal for int() with base 10: ", g.q(g.adjective())) }},
			{"AttributeError", "builtins", func(g *gen) string { return g.s("'NoneType' object has no attribute ", g.q(g.noun())) }},
			{"TypeError", "builtins", func(g *gen) string { return "unsupported operand type(s) for +: 'int' and 'NoneType'" }},
			{"OperationalError", "django.db.utils", func(g *gen) string {
				return g.s("could not connect to server: Connection refused\n\tIs the server running on host \"", g.pickS(dbHosts), "\" and accepting\n\tTCP/IP connections on port 5432?")
			}},
			{"IntegrityError", "django.db.utils", func(g *gen) string {
				n := g.noun()
				return g.s("duplicate key value violates unique constraint \"", n, "s_", n, "_pkey\"\nDETAIL:  Key (id)=(", g.itoa(g.r.IntN(99999)), ") already exists.")
			}},
			{"DoesNotExist", "orders.models", func(g *gen) string { return g.s(title(g.noun()), " matching query does not exist.") }},
			{"ReadTimeout", "httpx", func(g *gen) string { return "The read operation timed out" }},
		},
		mechanisms: []string{"django", "celery", "logging", "excepthook", "generic"},
		logger:     "django.request",
	},
	{
		name: "java", sdk: "sentry.java.spring-boot.jakarta", sdkVersion: "8.1.0", pkg: "maven:io.sentry:sentry-spring-boot-jakarta", lang: langJava, server: true,
		integrations: []string{"SpringBoot3", "Logback", "UncaughtExceptionHandler", "ShutdownHook", "SpringWebRequest"},
		ctxLines:     0, runtime: [2]string{"Java", "21.0.5"},
		libs: []libFrame{
			{"org.springframework.web.servlet.FrameworkServlet", "processRequest", "FrameworkServlet.java"},
			{"org.springframework.web.servlet.DispatcherServlet", "doDispatch", "DispatcherServlet.java"},
			{"org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerAdapter", "invokeHandlerMethod", "RequestMappingHandlerAdapter.java"},
			{"org.springframework.web.method.support.InvocableHandlerMethod", "doInvoke", "InvocableHandlerMethod.java"},
			{"jakarta.servlet.http.HttpServlet", "service", "HttpServlet.java"},
			{"org.apache.catalina.core.ApplicationFilterChain", "doFilter", "ApplicationFilterChain.java"},
			{"org.apache.catalina.core.StandardWrapperValve", "invoke", "StandardWrapperValve.java"},
			{"org.apache.coyote.http11.Http11Processor", "service", "Http11Processor.java"},
			{"org.apache.tomcat.util.net.NioEndpoint$SocketProcessor", "doRun", "NioEndpoint.java"},
			{"java.util.concurrent.ThreadPoolExecutor", "runWorker", "ThreadPoolExecutor.java"},
			{"java.lang.Thread", "run", "Thread.java"},
			{"org.hibernate.engine.jdbc.spi.SqlExceptionHelper", "convert", "SqlExceptionHelper.java"},
			{"org.hibernate.loader.ast.internal.SingleIdLoadPlan", "load", "SingleIdLoadPlan.java"},
			{"com.zaxxer.hikari.pool.HikariProxyPreparedStatement", "executeQuery", "HikariProxyPreparedStatement.java"},
			{"org.postgresql.jdbc.PgPreparedStatement", "executeWithFlags", "PgPreparedStatement.java"},
			{"org.springframework.aop.framework.CglibAopProxy$DynamicAdvisedInterceptor", "intercept", "CglibAopProxy.java"},
			{"org.springframework.transaction.interceptor.TransactionInterceptor", "invoke", "TransactionInterceptor.java"},
		},
		excs: []excType{
			{"NullPointerException", "java.lang", func(g *gen) string {
				n := title(g.noun())
				return g.s("Cannot invoke \"com.shop.", g.noun(), ".", n, ".get", title(g.noun()), "()\" because \"", g.noun(), "\" is null")
			}},
			{"IllegalStateException", "java.lang", func(g *gen) string {
				return g.s(title(g.noun()), " is ", g.adjective(), ": ", g.itoa(g.r.IntN(99999)))
			}},
			{"DataIntegrityViolationException", "org.springframework.dao", func(g *gen) string {
				return g.s("could not execute statement; constraint [", g.noun(), "s_pkey]")
			}},
			{"SocketTimeoutException", "java.net", func(g *gen) string { return "Read timed out" }},
			{"IllegalArgumentException", "java.lang", func(g *gen) string {
				return g.s("No enum constant com.shop.", title(g.noun()), "Status.", g.adjective())
			}},
			{"PSQLException", "org.postgresql.util", func(g *gen) string { return "ERROR: deadlock detected" }},
		},
		mechanisms: []string{"HandlerExceptionResolver", "UncaughtExceptionHandler", "chained"},
		logger:     "org.springframework.web.servlet.DispatcherServlet",
	},
	{
		name: "go", sdk: "sentry.go", sdkVersion: "0.31.1", pkg: "go:github.com/getsentry/sentry-go", lang: langGo, server: true,
		integrations: []string{"ContextifyFrames", "Environment", "GlobalTags", "IgnoreErrors", "IgnoreTransactions", "Modules"},
		ctxLines:     50, runtime: [2]string{"go", "go1.23.4"},
		libs: []libFrame{
			{"github.com/gin-gonic/gin", "(*Context).Next", "/go/pkg/mod/github.com/gin-gonic/gin@v1.10.0/context.go"},
			{"github.com/gin-gonic/gin", "(*Engine).handleHTTPRequest", "/go/pkg/mod/github.com/gin-gonic/gin@v1.10.0/gin.go"},
			{"github.com/gin-gonic/gin", "(*Engine).ServeHTTP", "/go/pkg/mod/github.com/gin-gonic/gin@v1.10.0/gin.go"},
			{"github.com/gin-gonic/gin", "CustomRecoveryWithWriter.func1", "/go/pkg/mod/github.com/gin-gonic/gin@v1.10.0/recovery.go"},
			{"net/http", "serverHandler.ServeHTTP", "/usr/local/go/src/net/http/server.go"},
			{"net/http", "(*conn).serve", "/usr/local/go/src/net/http/server.go"},
			{"net/http", "HandlerFunc.ServeHTTP", "/usr/local/go/src/net/http/server.go"},
			{"database/sql", "(*DB).QueryContext", "/usr/local/go/src/database/sql/sql.go"},
			{"database/sql", "(*DB).query", "/usr/local/go/src/database/sql/sql.go"},
			{"github.com/jackc/pgx/v5", "(*Conn).Query", "/go/pkg/mod/github.com/jackc/pgx/v5@v5.7.1/conn.go"},
			{"github.com/getsentry/sentry-go/http", "(*Handler).handle.func1", "/go/pkg/mod/github.com/getsentry/sentry-go@v0.31.1/http/sentryhttp.go"},
			{"google.golang.org/grpc", "(*Server).processUnaryRPC", "/go/pkg/mod/google.golang.org/grpc@v1.68.0/server.go"},
			{"runtime", "goexit", "/usr/local/go/src/runtime/asm_amd64.s"},
		},
		excs: []excType{
			{"*errors.errorString", "", func(g *gen) string { return "sql: no rows in result set" }},
			{"*fmt.wrapError", "", func(g *gen) string {
				return g.s(g.verb(), " ", g.noun(), " ", g.itoa(g.r.IntN(99999)), ": context deadline exceeded")
			}},
			{"*net.OpError", "", func(g *gen) string { return g.s("dial tcp: lookup ", g.pickS(dbHosts), ": no such host") }},
			{"*pgconn.PgError", "", func(g *gen) string {
				return g.s("ERROR: duplicate key value violates unique constraint \"", g.noun(), "s_pkey\" (SQLSTATE 23505)")
			}},
			{"runtime.Error", "", func(g *gen) string { return "runtime error: invalid memory address or nil pointer dereference" }},
			{"*url.Error", "", func(g *gen) string { return g.s("Get \"https://", g.pickS(apiHosts), "/v1/", g.noun(), "s\": EOF") }},
		},
		mechanisms: []string{"generic", "gin", "http"},
	},
	{
		name: "cocoa", sdk: "sentry.cocoa", sdkVersion: "8.43.0", pkg: "cocoapods:getsentry/sentry.cocoa", lang: langSwift, mobile: true,
		integrations: []string{"Crash", "AutoBreadcrumbTracking", "AutoSessionTracking", "ANRTracking", "NetworkTracking", "Screenshot", "ViewHierarchy", "UIEventTracking", "FramesTracking", "AppStartTracking"},
		libs: []libFrame{
			{"UIKitCore", "-[UIApplication sendAction:to:from:forEvent:]", ""},
			{"UIKitCore", "-[UIControl _sendActionsForEvents:withEvent:]", ""},
			{"UIKitCore", "-[UIWindow _sendTouchesForEvent:]", ""},
			{"UIKitCore", "UIApplicationMain", ""},
			{"CoreFoundation", "__CFRUNLOOP_IS_CALLING_OUT_TO_A_SOURCE0_PERFORM_FUNCTION__", ""},
			{"CoreFoundation", "__CFRunLoopDoSources0", ""},
			{"CoreFoundation", "CFRunLoopRunSpecific", ""},
			{"GraphicsServices", "GSEventRunModal", ""},
			{"libdispatch.dylib", "_dispatch_call_block_and_release", ""},
			{"libdispatch.dylib", "_dispatch_main_queue_drain", ""},
			{"SwiftUI", "closure #1 in ButtonAction.callAsFunction()", ""},
			{"Foundation", "-[NSURLSession dataTaskWithRequest:completionHandler:]", ""},
			{"libswiftCore.dylib", "_assertionFailure(_:_:file:line:flags:)", ""},
			{"dyld", "start", ""},
		},
		excs: []excType{
			{"NSInvalidArgumentException", "", func(g *gen) string {
				return g.s("-[__NSCFString count]: unrecognized selector sent to instance 0x6000", g.hexID(8))
			}},
			{"EXC_BAD_ACCESS", "", func(g *gen) string { return g.s("KERN_INVALID_ADDRESS at 0x00000000000000", g.hexID(2)) }},
			{"NSRangeException", "", func(g *gen) string {
				return g.s("*** -[__NSArrayM objectAtIndex:]: index ", g.itoa(5+g.r.IntN(9)), " beyond bounds [0 .. ", g.itoa(g.r.IntN(5)), "]")
			}},
			{"Fatal error", "", func(g *gen) string { return "Unexpectedly found nil while unwrapping an Optional value" }},
			{"HTTPClientError", "", func(g *gen) string { return g.s("HTTP Client Error with status code: ", g.itoa(500+g.r.IntN(5))) }},
		},
		mechanisms: []string{"mach", "signal", "nsexception", "HTTPClientError"},
	},
}

// platformFor picks an SDK platform that could have sent an event with
// this agent: browser SDKs need a browser, the iOS SDK an iOS app client;
// server SDKs see whatever client called them.
func (g *gen) platformFor(class useragent.Class) *platform {
	switch class {
	case useragent.Browser:
		if g.r.IntN(100) < 45 {
			return platforms[0]
		}
	case useragent.IOSApp:
		if g.r.IntN(100) < 70 {
			return platforms[5]
		}
	}
	return platforms[1+g.r.IntN(4)] // node, python, java, go
}
