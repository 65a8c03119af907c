package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/context/docker"
	"github.com/docker/docker/client"
	"github.com/rs/zerolog"
	"github.com/sirupsen/logrus"

	"github.com/berth-dev/berth/dockerio"
)

// composeCLI is the docker/cli command.Cli compose runs on. It wraps our own SDK
// client and overrides everything that would otherwise read the operator's
// ~/.docker config or context store: an empty config file means no proxy
// variables are injected into tenant containers and no registry credentials are
// ever in reach, and Client() can never hit DockerCli's lazy initialisation
// (which calls os.Exit on failure).
type composeCLI struct {
	*command.DockerCli
	api  client.APIClient
	conf *configfile.ConfigFile
}

func newComposeCLI(api client.APIClient) (*composeCLI, error) {
	base, err := command.NewDockerCli(
		command.WithAPIClient(api),
		command.WithInputStream(io.NopCloser(strings.NewReader(""))),
		command.WithOutputStream(io.Discard),
		command.WithErrorStream(io.Discard),
	)
	if err != nil {
		return nil, err
	}
	return &composeCLI{DockerCli: base, api: api, conf: configfile.New("")}, nil
}

func (c *composeCLI) Client() client.APIClient           { return c.api }
func (c *composeCLI) ConfigFile() *configfile.ConfigFile { return c.conf }
func (c *composeCLI) ServerInfo() command.ServerInfo     { return command.ServerInfo{OSType: "linux"} }
func (c *composeCLI) BuildKitEnabled() (bool, error)     { return false, nil }
func (c *composeCLI) CurrentContext() string             { return "default" }
func (c *composeCLI) CurrentVersion() string             { return c.api.ClientVersion() }
func (c *composeCLI) DockerEndpoint() docker.Endpoint {
	return docker.Endpoint{EndpointMeta: docker.EndpointMeta{Host: c.api.DaemonHost()}}
}

// composeLogger is where compose's logrus lines go: zerolog at debug.
var (
	composeLogger atomic.Pointer[zerolog.Logger]
	logrusOnce    sync.Once
)

// routeComposeLogs points compose's logrus output (process-global: compose logs
// through logrus' standard logger) at logger, at debug level, and never at stdout.
func routeComposeLogs(logger zerolog.Logger) {
	l := logger.With().Str("component", "compose").Logger()
	composeLogger.Store(&l)
	logrusOnce.Do(func() {
		std := logrus.StandardLogger()
		std.SetOutput(io.Discard)
		std.AddHook(logrusBridge{})
	})
}

type logrusBridge struct{}

func (logrusBridge) Levels() []logrus.Level { return logrus.AllLevels }

func (logrusBridge) Fire(entry *logrus.Entry) error {
	if l := composeLogger.Load(); l != nil {
		l.Debug().Str("level_compose", entry.Level.String()).Msg(entry.Message)
	}
	return nil
}

// runtimeVersioner is compose's unexported API-version lookup. Compose caches the
// first answer in a process-wide sync.Once, errors included: a first call made
// while the engine is down would poison every later create for the life of the
// process. ensureCompose makes that first call only after our own ping succeeded.
type runtimeVersioner interface {
	RuntimeVersion(ctx context.Context) (string, error)
}

// ensureCompose readies compose for its first call: the engine must answer, and
// compose's API-version cache must then hold a good value. Once primed, nothing is
// asked of Docker here (an engine gone later fails compose's own requests, which
// classify as ErrUnavailable).
func (e *Engine) ensureCompose(ctx context.Context) error {
	e.composeMu.Lock()
	defer e.composeMu.Unlock()
	if e.composeReady {
		return nil
	}
	if err := e.Ping(ctx); err != nil {
		return err
	}
	rv, ok := e.compose.(runtimeVersioner)
	if !ok {
		e.composeReady = true // a compose without the cache has nothing to poison
		return nil
	}
	// Not the caller's ctx: a cancellation here would be cached forever.
	primeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rv.RuntimeVersion(primeCtx); err != nil {
		return fmt.Errorf("compose runtime version (cached for the process lifetime; restart berthd): %w: %w", dockerio.ErrUnavailable, err)
	}
	e.composeReady = true
	return nil
}
