/**
 * The TLS alerts a broker sends about the client certificate, as OpenSSL names them in the error it
 * raises when one arrives ("... tlsv13 alert certificate required ..."). An alert is the broker's
 * verdict on ours; a broker certificate we refuse fails with a verification code instead.
 */
const CLIENT_CERTIFICATE_ALERTS: [RegExp, string][] = [
  [/alert certificate required/, 'the broker requires a client certificate: set the client certificate and key in the MQTT settings'],
  [/alert unknown ca/, "the broker does not trust the client certificate (unknown CA): it must be signed by a CA in the broker's cafile"],
  [/alert certificate expired/, 'the broker refused the client certificate: it has expired'],
  [/alert certificate revoked/, 'the broker refused the client certificate: it was revoked'],
  [/alert (bad certificate|unsupported certificate|certificate unknown|access denied)/, 'the broker refused the client certificate ($1)'],
  // TLS 1.2 has no "certificate required": a broker that requires one ends the handshake with this.
  [/alert handshake failure/, 'the broker refused the handshake: if it requires client certificates, set the client certificate and key'],
];

/** A readable reason when the broker's TLS alert is about the client certificate; null for any other error. */
export function describeClientCertificateAlert(error: Error): string | null {
  for (const [alert, reason] of CLIENT_CERTIFICATE_ALERTS) {
    const match = alert.exec(error.message);
    if (match) return `TLS error: ${reason.replace('$1', match[1] ?? '')}`;
  }
  return null;
}
