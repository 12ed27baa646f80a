/** The stylesheet of the error-code and client pages (inline: their CSP allows no other), readable from 320 px up. */
export const DOCS_STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1f2328;overflow-wrap:break-word}
code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}pre{background:#f6f8fa;padding:.6rem .8rem;border-radius:6px;overflow-x:auto}
pre code{padding:0;overflow-wrap:normal}table{border-collapse:collapse;width:100%;margin:.5rem 0;display:block;overflow-x:auto}
td,th{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}a{color:#0969da}
@media (max-width:40rem){body{margin:1rem auto;padding:0 .75rem}}`;
