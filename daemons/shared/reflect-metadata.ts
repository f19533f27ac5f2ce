// The smallest Reflect metadata API that @peculiar/x509's dependency tsyringe insists on at load time
// (it throws "tsyringe requires a reflect polyfill" otherwise). The `reflect-metadata` package is not a
// dependency of this project, so this module supplies defineMetadata/getMetadata over a WeakMap. Import it
// before @peculiar/x509.
type MetadataStore = Map<string | symbol | undefined, Map<unknown, unknown>>;

const store = new WeakMap<object, MetadataStore>();

function table(target: object, property: string | symbol | undefined, create: boolean): Map<unknown, unknown> | undefined {
  let byProperty = store.get(target);
  if (byProperty === undefined) {
    if (!create) return undefined;
    byProperty = new Map();
    store.set(target, byProperty);
  }
  let entries = byProperty.get(property);
  if (entries === undefined && create) {
    entries = new Map();
    byProperty.set(property, entries);
  }
  return entries;
}

interface ReflectMetadataApi {
  defineMetadata(key: unknown, value: unknown, target: object, property?: string | symbol): void;
  getOwnMetadata(key: unknown, target: object, property?: string | symbol): unknown;
  getMetadata(key: unknown, target: object, property?: string | symbol): unknown;
  hasMetadata(key: unknown, target: object, property?: string | symbol): boolean;
  metadata(key: unknown, value: unknown): (target: object, property?: string | symbol) => void;
}

const reflect = Reflect as unknown as Partial<ReflectMetadataApi>;
if (typeof reflect.getMetadata !== 'function') {
  const api: ReflectMetadataApi = {
    defineMetadata(key, value, target, property) {
      table(target, property, true)!.set(key, value);
    },
    getOwnMetadata(key, target, property) {
      return table(target, property, false)?.get(key);
    },
    getMetadata(key, target, property) {
      for (let t: object | null = target; t !== null; t = Object.getPrototypeOf(t) as object | null) {
        const entries = table(t, property, false);
        if (entries?.has(key) === true) return entries.get(key);
      }
      return undefined;
    },
    hasMetadata(key, target, property) {
      return api.getMetadata(key, target, property) !== undefined;
    },
    metadata(key, value) {
      return (target, property) => api.defineMetadata(key, value, target, property);
    },
  };
  Object.assign(Reflect, api);
}

export {};
