/**
 * What the dashboard's sign-in asks of a sign-in throttle: the interface belongs here, with its
 * only user (pages/auth.ts); infra/signInThrottle holds the implementations (memory, Redis) and
 * the limits they count (counters.ts), one chosen from configuration in infra/choose.ts.
 */
export interface SignInAttempt {
  /** Seconds to wait when a limit is reached (the attempt was not counted); 0 when it may go on. */
  waitSeconds: number;
  /** The password was right: forgives this attempt, which then counts against no limit. */
  succeeded(): Promise<void>;
}

export interface SignInThrottle {
  /** Counts an attempt to sign in as `email` from `ip`, unless a limit is already reached. */
  begin(email: string, ip: string): Promise<SignInAttempt>;
  close(): Promise<void>;
}
