/**
 * One policy's items of the RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers-10),
 * counted in requests of the route's cost, so a client that reads `q` and `r` as requests is right:
 * `q` requests fit in the window `w` (seconds), `r` more may be sent now, and `t` is the seconds until
 * another one can pass (0 while `r` > 0). A 429's Retry-After never points earlier than `t`.
 */
export function rateLimitItems(
  name: string,
  fields: { quota: number; windowSeconds: number; remaining: number; nextSeconds: number },
): { policy: string; limit: string } {
  return {
    policy: `"${name}";q=${fields.quota};w=${fields.windowSeconds}`,
    limit: `"${name}";r=${fields.remaining};t=${fields.remaining > 0 ? 0 : fields.nextSeconds}`,
  };
}
