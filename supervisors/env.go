package supervisors

import (
	"time"

	"github.com/rs/zerolog"
)

// Env is what every actor of the tree is handed besides its own
// collaborators: the tree, a logger that names the actor, and the clock.
type Env struct {
	Tree *Tree
	Log  zerolog.Logger
	Now  func() time.Time
}

// For is the env of one actor: every line it logs names it.
func (e Env) For(actor string) Env {
	e.Log = e.Log.With().Str("actor", actor).Logger()
	return e
}
