package control

import "coregate/admin/spec"

// compactPlugins has the routes of list at the indexes added, in
// increasing order (all of them when added is nil), keep their plugins as
// a list (spec.Route.CompactPlugins), each sharing the plugin names, and
// the configurations of the same bytes, of the route before it: routes
// loaded in bulk are mostly alike. At bench admin -plugins' 50 000 routes
// a route's map of two plugins was about 400 bytes of a worker's heap,
// its list is 80, and the bytes of its proxy-rewrite, the same for every
// route, are kept once. A configuration is never written once decoded
// (the worker reads its Spec only), so sharing its bytes is safe. It runs
// off the event loop, on the decoding goroutine; a route before one added
// is either one added before it, or the base's, which it reads only.
func compactPlugins(list []*spec.Route, added []int) {
	compact := func(i int) {
		var near *spec.Route
		if i > 0 {
			near = list[i-1]
		}
		if r := list[i]; r != nil {
			r.CompactPlugins(near)
		}
	}
	if added == nil {
		for i := range list {
			compact(i)
		}
		return
	}
	for _, i := range added {
		compact(i)
	}
}
