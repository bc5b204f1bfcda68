package secret

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// AWS is an aws object: the credentials the requests are signed with
// (each may be an $env:// reference, as in APISIX), the region (us-east-1
// when empty, the schema's default) and the endpoint (endpoint_url; AWS's
// own for the region when empty).
type AWS struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token"`
	Region          string `json:"region"`
	EndpointURL     string `json:"endpoint_url"`
}

// Get reads key from AWS Secrets Manager with the official SDK, as
// APISIX's aws.get does: key is a secret's name, optionally followed by
// "/<member>" of its value, a JSON object; since a name may hold "/", the
// longest name is tried first and, while Secrets Manager answers that
// there is no such secret, a segment at a time moves from the name into
// the member ("a/b/c": "a/b/c", then "a/b" and "c", then "a" and "b/c").
// The AWSCURRENT version is read. Each request is bounded by ctx and by
// DefaultTimeout; an error never holds a value. Safe for concurrent use;
// c nil is http.DefaultClient.
func (a *AWS) Get(ctx context.Context, c *http.Client, key string) (string, error) {
	if key == "" || key[0] == '/' {
		return "", errors.New("can't find main key, key: " + key)
	}
	if c == nil {
		c = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	region := a.Region
	if region == "" {
		region = "us-east-1"
	}
	o := secretsmanager.Options{
		Region:           region,
		HTTPClient:       c,
		RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(envValue(a.AccessKeyID),
			envValue(a.SecretAccessKey), envValue(a.SessionToken)),
	}
	if a.EndpointURL != "" {
		o.BaseEndpoint = aws.String(a.EndpointURL)
	}
	sm := secretsmanager.New(o)
	name, member := key, ""
	for {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{
			SecretId: aws.String(name), VersionStage: aws.String("AWSCURRENT"),
		})
		if err == nil {
			if out.SecretString == nil {
				return "", errors.New("the secret " + name + " has no string value")
			}
			if member == "" {
				return *out.SecretString, nil
			}
			var data map[string]json.RawMessage
			if json.Unmarshal([]byte(*out.SecretString), &data) != nil || data == nil {
				return "", errors.New("the value of the secret " + name + " is not a JSON object")
			}
			var s string
			raw, ok := data[member]
			if !ok || json.Unmarshal(raw, &s) != nil {
				return "", errors.New("no string member " + strconv.Quote(member) + " in the secret " + name)
			}
			return s, nil
		}
		var nf *types.ResourceNotFoundException
		i := strings.LastIndexByte(name, '/')
		if !errors.As(err, &nf) || i <= 0 {
			return "", errors.New("failed to retrieve data from aws secret manager: " + err.Error())
		}
		name, member = key[:i], key[i+1:]
	}
}
