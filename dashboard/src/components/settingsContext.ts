// How any component opens the settings dialog; apart from the dialog itself, which is
// loaded only when needed (it is not part of the first screen).
import { createContext, useContext } from "react";

export const SettingsContext = createContext<{ open: () => void }>({ open: () => {} });

export function useOpenSettings(): () => void {
  return useContext(SettingsContext).open;
}
