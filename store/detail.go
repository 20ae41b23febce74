package store

import "errors"

// Detailer is an error whose one-line Error() leaves out a cause that a
// person reading a log or --debug output may need: an SDK error with its
// operation, request id and host id. Detail returns that cause.
type Detailer interface {
	Detail() string
}

// Detail returns err's full text for logs and --debug: its one-line
// message plus the Detail of the first Detailer in its chain (the cause
// that user-facing messages leave out), joined by ": ".
func Detail(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var d Detailer
	if errors.As(err, &d) {
		if s := d.Detail(); s != "" {
			return msg + ": " + s
		}
	}
	return msg
}
