/**
 * Server-rendered HTML with escaping by default: every interpolated value is escaped unless it is
 * itself `html`. Pages are plain functions from data to markup; no business rule lives here.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type Part = Html | string | number | boolean | null | undefined | Part[];

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function render(part: Part): string {
  if (part === null || part === undefined || part === false || part === true) return '';
  if (part instanceof Html) return part.value;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Field errors by field name, shown next to each input. */
export type FieldErrors = Record<string, string>;

export function fieldErrors(errors: { field: string; message: string }[]): FieldErrors {
  const out: FieldErrors = {};
  for (const e of errors) {
    const field = e.field.replace(/\[\d+\]$/, '');
    out[field] = out[field] ? `${out[field]}; ${e.message}` : e.message;
  }
  return out;
}

/** A labelled input with its error message next to it (aria-describedby ties them together). */
export function field(options: {
  name: string;
  label: string;
  value?: string | null;
  type?: string;
  errors?: FieldErrors;
  required?: boolean;
  hint?: string;
  autocomplete?: string;
  multiline?: boolean;
}): Html {
  const id = `f-${options.name}`;
  const error = options.errors?.[options.name];
  const describedBy = [error ? `${id}-error` : '', options.hint ? `${id}-hint` : ''].filter(Boolean).join(' ');
  const attrs = html`name="${options.name}"
  id="${id}"${options.required ? html` required` : ''}${
    describedBy ? html` aria-describedby="${describedBy}"` : ''
  }${error ? html` aria-invalid="true"` : ''}${options.autocomplete ? html` autocomplete="${options.autocomplete}"` : ''}`;
  const input = options.multiline
    ? html`<textarea ${attrs} rows="4">${options.value ?? ''}</textarea>`
    : html`<input type="${options.type ?? 'text'}" ${attrs} value="${options.value ?? ''}" />`;
  return html`<div class="field${error ? ' has-error' : ''}">
    <label for="${id}">${options.label}</label>
    ${input} ${options.hint ? html`<p class="hint" id="${id}-hint">${options.hint}</p>` : ''}
    ${error ? html`<p class="error" id="${id}-error">${error}</p>` : ''}
  </div>`;
}
