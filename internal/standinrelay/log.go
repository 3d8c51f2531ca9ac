package standinrelay

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// LogLevel is logging.level; higher is more verbose.
type LogLevel int

// Levels, in Relay's names.
const (
	LevelOff LogLevel = iota
	LevelError
	LevelWarn
	LevelInfo
	LevelDebug
	LevelTrace
)

var levelNames = [...]string{"OFF", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"}

func (l LogLevel) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return "?"
	}
	return levelNames[l]
}

// ParseLogLevel parses error | warn | info | debug | trace | off.
func ParseLogLevel(s string) (LogLevel, error) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return LogLevel(i), nil
		}
	}
	if strings.EqualFold(s, "warning") {
		return LevelWarn, nil
	}
	return 0, fmt.Errorf("logging.level: unknown level %q", s)
}

// Logger writes one line per message: "<RFC 3339 UTC> <LEVEL> standin-relay: <message>".
type Logger struct {
	mu    sync.Mutex
	w     io.Writer
	level LogLevel
}

// NewLogger logs messages at level or more severe to w.
func NewLogger(w io.Writer, level LogLevel) *Logger {
	return &Logger{w: w, level: level}
}

func (l *Logger) logf(level LogLevel, format string, args ...any) {
	if l == nil || level > l.level {
		return
	}
	line := time.Now().UTC().Format("2006-01-02T15:04:05.000Z") + " " + level.String() + " standin-relay: " + fmt.Sprintf(format, args...)
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	l.mu.Lock()
	_, _ = io.WriteString(l.w, line)
	l.mu.Unlock()
}

// Errorf, Warnf, Infof, Debugf and Tracef log at their level.
func (l *Logger) Errorf(format string, args ...any) { l.logf(LevelError, format, args...) }
func (l *Logger) Warnf(format string, args ...any)  { l.logf(LevelWarn, format, args...) }
func (l *Logger) Infof(format string, args ...any)  { l.logf(LevelInfo, format, args...) }
func (l *Logger) Debugf(format string, args ...any) { l.logf(LevelDebug, format, args...) }
func (l *Logger) Tracef(format string, args ...any) { l.logf(LevelTrace, format, args...) }
