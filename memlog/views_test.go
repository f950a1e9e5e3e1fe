package memlog_test

import (
	"testing"

	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/viewstest"
)

func TestViewsConformance(t *testing.T) {
	viewstest.Run(t, func(*testing.T) (viewstest.Log, viewstest.Views) {
		l := memlog.New()
		return l, memlog.NewViews(l)
	})
}
