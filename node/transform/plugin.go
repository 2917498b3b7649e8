package transform

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgemq/ledge/plugins"
)

// PluginRegistry is the node's plugin registry as a transform uses it
// (*pluginreg.Registry).
type PluginRegistry interface {
	AwaitLoaded(ctx context.Context, name string, maxWait time.Duration) error
	Host() *plugins.Host
	Stat(name string) (plugins.Info, error)
}

// Registry adapts the node's plugin registry: a transform's call waits
// for its plugin to load after a start, and Check says whether a plugin
// is a registered transform.
func Registry(reg PluginRegistry) RegistryPlugin { return RegistryPlugin{reg} }

// RegistryPlugin is a Plugin over a PluginRegistry.
type RegistryPlugin struct{ reg PluginRegistry }

// TransformFunc runs plugin name once it is loaded.
func (p RegistryPlugin) TransformFunc(ctx context.Context, name string, params plugins.Params, v *plugins.View, state []byte,
	use func(plugins.TransformResult) error) error {
	if err := p.reg.AwaitLoaded(ctx, name, callWait); err != nil {
		return err
	}
	h := p.reg.Host()
	if h == nil {
		return fmt.Errorf("%w: %q: this node runs no plugins", plugins.ErrUnknownPlugin, name)
	}
	return h.TransformFunc(ctx, name, params, v, state, use)
}

// Check returns nil when name is a registered transform plugin.
func (p RegistryPlugin) Check(name string) error {
	info, err := p.reg.Stat(name)
	if err != nil {
		return fmt.Errorf("%w: plugin %q: %w", ErrConfig, name, err)
	}
	if info.Kind != plugins.KindTransform {
		return fmt.Errorf("%w: plugin %q is a %s, not a transform", ErrConfig, name, info.Kind)
	}
	return nil
}
