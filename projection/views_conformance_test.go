package projection_test

import (
	"testing"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/viewstest"
)

func TestViewsConformance(t *testing.T) {
	viewstest.Run(t, func(t *testing.T) (viewstest.Log, viewstest.Views) {
		e := open(t, natstest.Server(t).ClientURL())
		p, _ := start(t, e.log)
		return e.log, p
	})
}
