package faultproxy

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// emptySHA256 is the hex SHA-256 of an empty payload.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// resign signs req again with SigV4 for S3, after a fault changed its query
// or headers. The payload hash is the one the client declared.
func (p *Proxy) resign(req *http.Request) {
	if p.opts.AccessKey == "" {
		req.Header.Del("Authorization")
		return
	}
	payload := req.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = emptySHA256
	}
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Date")
	creds := aws.Credentials{AccessKeyID: p.opts.AccessKey, SecretAccessKey: p.opts.SecretKey}
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	// SignHTTP fails only on a malformed request; then the server refuses it.
	_ = s.SignHTTP(context.Background(), creds, req, payload, "s3", p.opts.Region, time.Now().UTC())
}
