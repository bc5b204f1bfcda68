package tlsrec

// Record content types (RFC 8446 §5.1, RFC 5246 §6.2.1).
const (
	typeChangeCipherSpec = 20
	typeAlert            = 21
	typeHandshake        = 22
	typeApplicationData  = 23
)

// Sizes of the record layer (RFC 8446 §5.1, §5.2).
const (
	// MaxPlaintext is the most application data one record carries.
	MaxPlaintext = 16384
	// MaxRecord is the longest record RecordLen accepts: a header and a
	// body of at most 16384+256 bytes (RFC 8446 §5.2; TLS 1.2 AEAD records
	// are shorter).
	MaxRecord = headerLen + MaxPlaintext + 256
	headerLen = 5
)

// Alert descriptions sent or recognised (RFC 8446 §6).
const (
	alertCloseNotify       = 0
	alertUnexpectedMessage = 10
	alertBadRecordMAC      = 20
	alertRecordOverflow    = 22
	alertDecodeError       = 50
	alertProtocolVersion   = 70
	alertLevelWarning      = 1
	alertLevelFatal        = 2
)

// RecordLen tells the length of the complete record at the start of b
// (header and body): 0 while b holds less than one record, -1 as soon as
// what b holds cannot start a record (a content type other than
// change_cipher_spec, alert, handshake or application_data, a major
// version other than 3, a body longer than 16384+256 bytes). An event loop
// uses it to cut its input into whole records; it looks at the first five
// bytes only, and allocates nothing.
func RecordLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if b[0] < typeChangeCipherSpec || b[0] > typeApplicationData {
		return -1
	}
	if len(b) < 2 {
		return 0
	}
	if b[1] != 3 {
		return -1
	}
	if len(b) < headerLen {
		return 0
	}
	n := int(b[3])<<8 | int(b[4])
	if n > MaxRecord-headerLen {
		return -1
	}
	if len(b) < headerLen+n {
		return 0
	}
	return headerLen + n
}
