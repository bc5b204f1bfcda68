// Package all registers every plugin the gateway has: importing it (for
// its side effects) is what puts them in plugins.Default, for the Admin
// API's checks and the workers' builds alike. A new plugin package is
// added here.
package all

import (
	_ "coregate/plugins/mocking" // mocking (10900, access)
)
