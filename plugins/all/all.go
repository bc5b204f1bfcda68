// Package all imports every plugin of the gateway for its registration in
// plugins.Default: a program that serves plugins (cmd/coregate) imports
// it, blank, and has them all. A new plugin package adds its import here.
package all

import (
	// Each registers itself in plugins.Default from its init function.
	_ "coregate/plugins/keyauth"
	_ "coregate/plugins/proxyrewrite"
)
