/** The two databases the store runs on: the same queries; migrations and a few statements branch on it. */
export type Dialect = 'sqlite' | 'postgres';
