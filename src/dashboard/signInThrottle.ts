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

/** What an attempt is beside its account and address. */
export interface AttemptOptions {
  /**
   * The id of a valid device cookie for this account (devices.ts): the browser signed in as it
   * before, so the attempt counts per device alone and no account-wide lockout stops it.
   */
  device?: string | null;
  /** Whose budget it uses: sign-in (default) or forgot-password requests (`reset`). */
  budget?: 'sign_in' | 'reset';
}

/** Requests without a session allowed per minute: from one network, and from everyone together. */
export interface VisitLimits {
  perNetwork: number;
  total: number;
}

export interface SignInThrottle {
  /** Counts an attempt to sign in as `email` from `ip`, unless a limit is already reached. */
  begin(email: string, ip: string, options?: AttemptOptions): Promise<SignInAttempt>;
  /**
   * Counts a request without a session to an endpoint that stores or fetches something (passkey
   * options, SSO, invitation and reset pages: IDENTITY.md rule 15), per network and in total over
   * a minute. Seconds to wait when a limit is reached (the request was not counted), else 0.
   */
  visit(ip: string): Promise<number>;
  close(): Promise<void>;
}
