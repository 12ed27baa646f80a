import type { Page } from './types.js';

/**
 * What a list method returns: awaited, one page (`{data, has_more, next_cursor}`); iterated with
 * `for await`, every item across pages. Pages are fetched one request at a time and only as far
 * as the caller iterates, by sending each page's `next_cursor` back unchanged (never a cursor of
 * our own making). Nothing is requested until it is awaited or iterated.
 */
export class PagePromise<T> implements PromiseLike<Page<T>>, AsyncIterable<T> {
  readonly #fetchPage: (cursor: string | undefined) => Promise<Page<T>>;
  readonly #cursor: string | undefined;
  #first: Promise<Page<T>> | undefined;

  /** `fetchPage(cursor)` requests one page; `cursor` is undefined for the first one. */
  constructor(fetchPage: (cursor: string | undefined) => Promise<Page<T>>, cursor?: string) {
    this.#fetchPage = fetchPage;
    this.#cursor = cursor;
  }

  readonly [Symbol.toStringTag] = 'PagePromise';

  #firstPage(): Promise<Page<T>> {
    this.#first ??= this.#fetchPage(this.#cursor);
    return this.#first;
  }

  then<R1 = Page<T>, R2 = never>(
    onfulfilled?: ((page: Page<T>) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.#firstPage().then(onfulfilled, onrejected);
  }

  catch<R = never>(onrejected?: ((reason: unknown) => R | PromiseLike<R>) | null): Promise<Page<T> | R> {
    return this.#firstPage().catch(onrejected);
  }

  finally(onfinally?: (() => void) | null): Promise<Page<T>> {
    return this.#firstPage().finally(onfinally);
  }

  /** Every page, starting with the first; stops after the page whose `next_cursor` is null. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let page = await this.#firstPage();
    yield page;
    while (page.has_more && page.next_cursor) {
      page = await this.#fetchPage(page.next_cursor);
      yield page;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }
}
