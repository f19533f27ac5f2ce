// The KV cache as vLLM V1's block pool keeps it: a fixed number of blocks of block_size tokens, each with a reference
// count, and one queue of free blocks. A full block that has been computed is registered under the hash of its tokens
// (chained to the hash of the block before it), so a later request with the same prefix can take it instead of
// recomputing it. A block whose last user lets go stays registered and goes to the back of the free queue: free, but
// still a cache hit until a new allocation takes it from the front and so evicts it (least recently freed first).
import { createHash } from 'node:crypto';

/** The parent of a prompt's first block: a fixed value, so the same prompt hashes the same in every process. */
const ROOT_HASH = '0'.repeat(64);

/** The hash of one full block: SHA-256 over the parent block's hash and the block's token ids (vLLM's default algorithm). */
export function blockHash(parent: string | undefined, tokenIds: readonly number[]): string {
  const ids = Buffer.alloc(tokenIds.length * 4);
  tokenIds.forEach((id, i) => {
    ids.writeUInt32LE(id, i * 4);
  });
  return createHash('sha256')
    .update(parent ?? ROOT_HASH)
    .update(ids)
    .digest('hex');
}

interface Block {
  refCount: number;
  hash: string | undefined;
}

export class BlockPool {
  readonly numBlocks: number;
  readonly #blocks: Block[];
  /** Free blocks in eviction order: the first key is the next one an allocation takes. */
  readonly #free = new Map<number, true>();
  readonly #cached = new Map<string, number>();
  #evictions = 0;

  constructor(numBlocks: number) {
    this.numBlocks = numBlocks;
    this.#blocks = Array.from({ length: numBlocks }, () => ({ refCount: 0, hash: undefined }));
    for (let id = 0; id < numBlocks; id++) this.#free.set(id, true);
  }

  get numFree(): number {
    return this.#free.size;
  }

  /** Blocks registered under a hash, in use or free. */
  get numCached(): number {
    return this.#cached.size;
  }

  /** Registered blocks an allocation has taken (and so dropped from the cache). */
  get evictions(): number {
    return this.#evictions;
  }

  /** The fraction of blocks in use: free blocks, cached or not, are not in use (vLLM's kv_cache_usage). */
  get usage(): number {
    return 1 - this.#free.size / this.numBlocks;
  }

  /** The blocks of the longest run of `hashes`, from the first, that is cached. */
  lookup(hashes: readonly string[]): number[] {
    const hits: number[] = [];
    for (const hash of hashes) {
      const id = this.#cached.get(hash);
      if (id === undefined) break;
      hits.push(id);
    }
    return hits;
  }

  /** How many of `ids` are free now (a hit on them takes them out of the free queue). */
  countFree(ids: readonly number[]): number {
    return ids.filter((id) => this.#free.has(id)).length;
  }

  /** Takes a reference on cached blocks a request reuses; a free one leaves the free queue. */
  touch(ids: readonly number[]): void {
    for (const id of ids) {
      const block = this.#blocks[id]!;
      if (block.refCount === 0) this.#free.delete(id);
      block.refCount++;
    }
  }

  /** `count` blocks from the front of the free queue, evicting any that were cached; undefined when too few are free. */
  allocate(count: number): number[] | undefined {
    if (count > this.#free.size) return undefined;
    const ids: number[] = [];
    for (const id of this.#free.keys()) {
      if (ids.length === count) break;
      ids.push(id);
    }
    for (const id of ids) {
      this.#free.delete(id);
      const block = this.#blocks[id]!;
      if (block.hash !== undefined) {
        this.#cached.delete(block.hash);
        block.hash = undefined;
        this.#evictions++;
      }
      block.refCount = 1;
    }
    return ids;
  }

  /** Drops one reference on each block, in the order given; a block nobody holds goes to the back of the free queue. */
  release(ids: readonly number[]): void {
    for (const id of ids) {
      const block = this.#blocks[id]!;
      block.refCount--;
      if (block.refCount === 0) this.#free.set(id, true);
    }
  }

  /** Registers a computed full block under its hash; a hash already registered keeps its first block. */
  register(id: number, hash: string): void {
    const block = this.#blocks[id]!;
    if (block.hash !== undefined || this.#cached.has(hash)) return;
    block.hash = hash;
    this.#cached.set(hash, id);
  }
}
