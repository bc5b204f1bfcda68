// Command demoupstream is the small origin `make run` puts behind the
// gateway: GET /hello answers 1 KiB of "1234567890" (as the benchmark
// upstream), anything else echoes the request line and headers.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net/http"
	"sort"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:1980", "address to serve")
	flag.Parse()
	body := append(bytes.Repeat([]byte("1234567890"), 102), "1234"...)
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s\nhost: %s\n", r.Method, r.RequestURI, r.Proto, r.Host)
		names := make([]string, 0, len(r.Header))
		for k := range r.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, v := range r.Header[k] {
				fmt.Fprintf(w, "%s: %s\n", k, v)
			}
		}
	})
	log.Printf("demo upstream on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
