package orchestrator

import (
	"fmt"
	"log/slog"

	"github.com/orchd/orchd/httpgate"
)

// LogConfig is the config file's log section: what the daemon logs
// besides what changes or goes wrong. The log's format and level are the
// command line's (--log-format, --log-level).
type LogConfig struct {
	// Access is the level of the access log, one record per HTTP request
	// and gRPC call: debug (the default), info, or off. At debug the
	// records show only with --log-level debug, and a request costs a
	// level check; at info they show at the default level.
	Access string `yaml:"access"`
}

// Access log levels, as LogConfig.Access names them.
const (
	accessOff   = "off"
	accessDebug = "debug"
	accessInfo  = "info"
)

// validate checks the section.
func (c LogConfig) validate() error {
	_, _, err := c.accessLevel()
	return err
}

// accessLog returns the access log the section asks for, writing to log,
// or nil when it is off.
func (c LogConfig) accessLog(log *slog.Logger) *httpgate.AccessLog {
	level, on, _ := c.accessLevel() // validated with the config
	if !on {
		return nil
	}
	return httpgate.NewAccessLog(level, log)
}

// accessLevel is the level access records are logged at; on is false
// when they are not logged at all.
func (c LogConfig) accessLevel() (level slog.Level, on bool, err error) {
	switch c.Access {
	case accessDebug, "":
		return slog.LevelDebug, true, nil
	case accessInfo:
		return slog.LevelInfo, true, nil
	case accessOff:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("config: log.access %q: want debug, info or off", c.Access)
}
