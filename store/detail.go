package store

// Detail returns err's full text for logs and --debug: its one-line
// message plus the underlying cause (an SDK error with request and host
// ids) that user-facing messages leave out.
func Detail(err error) string {
	if err == nil {
		return ""
	}
	return err.Error() // TODO(issue 13): helper C
}
