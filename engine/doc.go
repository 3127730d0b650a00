// Package engine is Sluice's Kafka broker logic: it turns one request frame
// into one response, and never touches a socket.
//
// The network layer hands Broker.Handle a complete request frame (without
// its 4-byte size prefix) and a callback. The engine decodes the frame with
// franz-go's kmsg, runs the handler registered for the API key (one file per
// key: 00_produce.go, 01_fetch.go, …, each opening with the versions it serves)
// and calls the callback exactly once with a *Response: a list of parts, each
// a byte slice or a file region of a segment (storage.Region). File regions
// are how fetches stay zero-copy: the record bytes go from the page cache to
// the socket without entering the broker's memory. A region holds its
// segment's descriptor open until the network layer calls Response.Release,
// exactly once, after writing the parts or dropping the connection.
//
// Requests on one connection are handled one at a time, as Kafka does (it
// mutes a channel until the response to its current request is sent), so a
// connection's responses leave in request order by construction; handlers may
// still complete later and from another goroutine (a long-polling fetch).
package engine
