// Package s3store reads pinned S3 objects and keeps a pinfs store in an S3
// bucket, with aws-sdk-go-v2.
//
// # Versions
//
// A member object is always read at its pinned version: the only functions
// that GET or HEAD a member, getVersion and headVersion (read.go), take a
// version, which only pin makes from a validated store.Object, and they
// always send its VersionId and check the VersionId of the answer
// (store.ErrVersionMismatch). Reads by key alone exist only on *Bucket, for
// the store's own blobs under its prefix (bucket.go), which callers address
// by content and verify.
//
// # Configuration
//
// NewClient uses the SDK's default chain (environment, shared files, IMDS)
// for credentials and region, and honours AWS_ENDPOINT_URL_S3,
// AWS_ENDPOINT_URL and AWS_CA_BUNDLE itself. See NewClient for what pinfs
// adds.
package s3store

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/pinfs/pinfs/store"
)

const (
	// defaultRegion applies when neither the environment nor the shared
	// config names one; S3-compatible servers mostly accept any region.
	defaultRegion = "us-east-1"
	// maxAttempts bounds the SDK's retries of throttling, 5xx and broken
	// connections (standard retryer, exponential backoff with jitter), for
	// every request but ranged member reads.
	maxAttempts = 5
	// maxIdlePerHost keeps enough warm connections for parallel ranged GETs
	// to one endpoint (net/http's default is 2).
	maxIdlePerHost = 64
)

var (
	_ store.ObjectReader = (*Client)(nil)
	_ store.Lister       = (*Client)(nil)
)

// Client reads S3 member objects by version and lists versioned buckets.
// It is safe for concurrent use.
type Client struct {
	api     *s3.Client
	workers *workers // runs member GETs (workers.go)

	// ListParallel bounds how many sub-prefixes ListCurrent lists at once:
	// 0 means DefaultListParallel, 1 a sequential listing. Set it before
	// the Client is used.
	ListParallel int
}

// listParallel is ListParallel with its default applied.
func (c *Client) listParallel() int {
	if c.ListParallel <= 0 {
		return DefaultListParallel
	}
	return c.ListParallel
}

// NewClient returns a Client configured from the environment the way the
// AWS CLI is, plus:
//   - region us-east-1 when none is configured;
//   - path-style addressing when a custom endpoint is set
//     (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or a profile's endpoint_url),
//     as S3-compatible servers on an IP address or one host name need;
//   - checksums only where S3 requires them, so ranged GETs do not log
//     "response has no checksum" warnings (pinfs verifies content itself);
//   - up to 64 idle connections per host, for parallel ranged GETs;
//   - credential failures that mapErr can tell apart: "no AWS
//     credentials" when the chain found none and fell back to the EC2
//     instance role, which failed too;
//   - the standard retryer with 5 attempts and no client-side retry quota
//     for the store's own blobs, listings and whole-object reads, so that
//     a burst of throttling backs off instead of failing once a shared
//     token bucket is empty. Ranged member reads make one attempt (see
//     getVersion): their caller retries them, and throttling answers wrap
//     store.ErrThrottled so that it can slow down.
//
// ctx bounds only the loading of the configuration; credentials are
// fetched lazily with each request's context.
func NewClient(ctx context.Context) (*Client, error) {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 4 * maxIdlePerHost
		tr.MaxIdleConnsPerHost = maxIdlePerHost
	})
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithDefaultRegion(defaultRegion),
		// A BuildableClient, so that the SDK can still add AWS_CA_BUNDLE.
		config.WithHTTPClient(hc),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.RateLimiter = ratelimit.None
			})
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS configuration: %w", err)
	}
	cfg.Credentials = credentialsSource{
		CredentialsProvider: cfg.Credentials,
		fallback:            aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)),
	}
	pathStyle := os.Getenv("AWS_ENDPOINT_URL_S3") != "" || aws.ToString(cfg.BaseEndpoint) != ""
	api := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
	})
	return &Client{api: api, workers: newWorkers()}, nil
}

// credentialsSource is the SDK's credential chain (cached) with its
// failures wrapped in a credentialsError, so that mapErr can say in one
// line that there are no credentials instead of showing the chain.
type credentialsSource struct {
	aws.CredentialsProvider
	fallback bool // the chain found nothing and fell back to the EC2 instance role (IMDS)
}

// Retrieve returns the chain's credentials, or its error as a credentialsError.
func (s credentialsSource) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := s.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return c, &credentialsError{err: err, none: s.fallback}
	}
	return c, nil
}

// IsCredentialsProvider lets aws.IsCredentialsProvider see the wrapped
// provider (the SDK asks whether credentials are anonymous).
func (s credentialsSource) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(s.CredentialsProvider, target)
}

// ProviderSources passes on the wrapped provider's sources (the SDK
// reports them in its user agent).
func (s credentialsSource) ProviderSources() []aws.CredentialSource {
	if p, ok := s.CredentialsProvider.(aws.CredentialProviderSource); ok {
		return p.ProviderSources()
	}
	return nil
}
