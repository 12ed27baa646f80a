/** A path below the base URL with each id encoded as one segment: path`/contacts/${id}`. */
export function path(strings: TemplateStringsArray, ...ids: string[]): string {
  return strings.reduce((out, part, i) => out + part + (i < ids.length ? encodeURIComponent(ids[i]!) : ''), '');
}
