/**
 * The `Content-Disposition` of a download (RFC 6266/8187): an ASCII fallback name plus the exact
 * UTF-8 name, safe against header injection. Sent by /downloads and set on presigned S3 links.
 */
export function contentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}
