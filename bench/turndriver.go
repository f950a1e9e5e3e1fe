package bench

import (
	"context"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/service"
)

// turnDriver runs the phases of a turn through one transport.
type turnDriver interface {
	begin(ctx context.Context, session string) (catalog, loaded []string, err error)
	discover(ctx context.Context, session, name string) error
	dispatch(ctx context.Context, session string) error
	end(ctx context.Context, session string) error
	resume(ctx context.Context, session string) error
}

type engineDriver struct{ eng *service.Engine }

func (d engineDriver) begin(ctx context.Context, s string) ([]string, []string, error) {
	v, err := d.eng.BeginTurn(ctx, s, origin, service.ResolveRequest{})
	return v.Catalog, v.Loaded, err
}

func (d engineDriver) discover(ctx context.Context, s, name string) error {
	_, err := d.eng.Discover(ctx, s, origin, service.DiscoverRequest{Search: deferral.SearchRequest{Names: []string{name}}})
	return err
}

func (d engineDriver) dispatch(ctx context.Context, s string) error {
	_, err := d.eng.Dispatch(ctx, s, "")
	return err
}

func (d engineDriver) end(ctx context.Context, s string) error {
	_, err := d.eng.EndTurn(ctx, s, origin)
	return err
}

func (d engineDriver) resume(ctx context.Context, s string) error {
	_, err := d.eng.Resume(ctx, s, origin, service.ResolveRequest{})
	return err
}

type httpDriver struct{ c *client.Client }

func (d httpDriver) begin(ctx context.Context, s string) ([]string, []string, error) {
	v, err := d.c.TurnBegin(ctx, client.BeginTurnRequest{Session: s})
	return v.Catalog, v.Loaded, err
}

func (d httpDriver) discover(ctx context.Context, s, name string) error {
	_, err := d.c.TurnDiscover(ctx, client.DiscoverRequest{Session: s, Names: []string{name}})
	return err
}

func (d httpDriver) dispatch(ctx context.Context, s string) error {
	_, err := d.c.TurnDispatch(ctx, client.DispatchRequest{Session: s})
	return err
}

func (d httpDriver) end(ctx context.Context, s string) error {
	_, err := d.c.TurnEnd(ctx, client.TurnRequest{Session: s})
	return err
}

func (d httpDriver) resume(ctx context.Context, s string) error {
	_, err := d.c.Resume(ctx, client.ResumeRequest{Session: s})
	return err
}
