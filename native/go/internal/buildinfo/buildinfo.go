// Package buildinfo says what the server and the client were built with, read from the binary itself.
package buildinfo

import "runtime/debug"

// GorillaVersion is the gorilla/websocket version compiled in, as go.mod pins it.
func GorillaVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, module := range info.Deps {
			if module.Path == "github.com/gorilla/websocket" {
				return module.Version
			}
		}
	}
	return "unknown"
}
