// Package plugintest is the test kit of plugins: a fake request context
// (Ctx), a runner that takes one request through a set of built plugins the
// way the worker does (Run), and AllocsPerRun, so that a plugin is tested
// as worker/alloc_test.go tests the request path: built once, then run
// many times, with no allocation per request.
//
//	phases, err := reg.BuildPhases(conf, plugins.NewLocalEnv())
//	c := plugintest.NewCtx("GET", "/hello?apikey=k").WithHeader("Host", "a.com")
//	plugintest.Run(&phases, c)
//	// c.Status(), c.Body, c.ResponseHeader("X-RateLimit-Remaining")…
//	plugintest.AllocsPerRun(t, 200, func() { c.Reset(); plugintest.Run(&phases, c) })
package plugintest
