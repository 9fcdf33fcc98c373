package harvestersim

func (h *Harvester) setupControllers() error {
	mgr := h.Env.Manager
	c := mgr.GetClient()
	for _, setup := range []func() error{
		func() error { return (&vmReconciler{Client: c}).setup(mgr) },
		func() error { return (&vmiReconciler{Client: c, h: h}).setup(mgr) },
		func() error { return (&pvcReconciler{Client: c}).setup(mgr) },
		func() error { return (&lbReconciler{Client: c, h: h}).setup(mgr) },
		func() error { return (&ipPoolReconciler{Client: c}).setup(mgr) },
		func() error { return (&migrationReconciler{Client: c}).setup(mgr) },
	} {
		if err := setup(); err != nil {
			return err
		}
	}
	return nil
}
