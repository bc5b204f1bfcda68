package worker

import "strconv"

// Answers the gateway writes itself. Bodies follow APISIX: nginx's HTML error
// page with APISIX's footer (CRLF line ends), and the JSON 404 for a request
// no route matched.

var notFoundBody = []byte(`{"error_msg":"404 Route Not Found"}` + "\n")

const (
	ctHTML = "text/html; charset=utf-8"
	ctText = "text/plain; charset=utf-8"
)

var statusText = map[int]string{
	400: "Bad Request",
	401: "Unauthorized",
	403: "Forbidden",
	404: "Not Found",
	405: "Not Allowed",
	408: "Request Time-out",
	413: "Request Entity Too Large",
	414: "Request-URI Too Large",
	429: "Too Many Requests",
	431: "Request Header Fields Too Large",
	500: "Internal Server Error",
	501: "Not Implemented",
	502: "Bad Gateway",
	503: "Service Temporarily Unavailable",
	504: "Gateway Time-out",
	505: "HTTP Version Not Supported",
}

// pageTitles are the titles of nginx's pages that differ from the status
// line's reason.
var pageTitles = map[int]string{401: "Authorization Required"}

// reasonPhrases are nginx's reason phrases of the statuses that have no
// page, for a plugin's answer (appendStatusLine).
var reasonPhrases = map[int]string{
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 206: "Partial Content",
	301: "Moved Permanently", 302: "Moved Temporarily", 303: "See Other", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	402: "Payment Required", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
	411: "Length Required", 412: "Precondition Failed", 415: "Unsupported Media Type",
	416: "Requested Range Not Satisfiable", 421: "Misdirected Request", 507: "Insufficient Storage",
}

// redirectTitles are the titles of nginx's pages for the redirections, the
// page a plugin's answer without a body gets (redirect's): nginx writes
// "302 Found" on the page of a "302 Moved Temporarily".
var redirectTitles = map[int]string{
	301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect", 308: "Permanent Redirect",
}

// errorPages holds the pre-rendered body of each status above, and of the
// redirections.
var errorPages = func() map[int][]byte {
	m := make(map[int][]byte, len(statusText)+len(redirectTitles))
	page := func(code int, text string) {
		title := strconv.Itoa(code) + " " + text
		m[code] = []byte("<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
			"</h1></center>\r\n<hr><center>openresty</center>\r\n" +
			"<p><em>Powered by <a href=\"https://apisix.apache.org/\">APISIX</a>.</em></p></body>\r\n</html>\r\n")
	}
	for code, text := range statusText {
		if t, ok := pageTitles[code]; ok {
			text = t
		}
		page(code, text)
	}
	for code, text := range redirectTitles {
		page(code, text)
	}
	return m
}()

// statusLines holds "HTTP/1.1 <code> <text>\r\n" for the statuses above.
var statusLines = func() map[int][]byte {
	m := make(map[int][]byte, len(statusText))
	for code, text := range statusText {
		m[code] = []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n")
	}
	return m
}()
