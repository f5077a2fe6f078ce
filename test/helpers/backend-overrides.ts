import type { SessionPersistence } from '../../src/persistence.js'

/**
 * `inner` with some of its methods replaced (a close that hangs, a read that fails once…): every
 * other member is `inner`'s own, bound to it. What a test's scripted backend needs in a line.
 */
export function withOverrides<P extends SessionPersistence>(inner: P, overrides: { [K in keyof P]?: P[K] }): P {
  return new Proxy(inner, {
    get(target, prop) {
      if (Object.hasOwn(overrides, prop)) return (overrides as Record<PropertyKey, unknown>)[prop]
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
}
